import { useEffect, useState } from 'preact/hooks';
import { call } from '../api';
import { canChange, type PageProps } from '../widgets';
import { ConfigHeader, EditorForm, ListTable } from '../configParts';
import { DurationInput, formatDuration } from '../duration';
import { useAction } from '../parts';
import { KNOWN_CHANNEL_KEYS, MAX_FLOW_STEPS, MAX_RESPONSE_WINDOW_MINUTES } from '../rules';

interface Flow {
  id: string;
  name: string;
  isDefault: boolean;
  steps: Array<{ order: number; channel: string; delayMinutes: number }>;
  responseWindowMinutes: number | null;
}
/** Minutes as the duration fields give them: a number, the text as typed when it is not one (the API says why), or none. */
type Minutes = number | string | null;
interface Draft {
  name: string;
  steps: Array<{ channel: string; delayMinutes: Minutes }>;
  responseWindowMinutes: Minutes;
  isDefault: boolean;
}

const EMPTY: Draft = { name: '', steps: [{ channel: 'EMAIL', delayMinutes: 0 }], responseWindowMinutes: null, isDefault: false };

/** Flows: the list with the default marked, one form that creates a flow or edits the one chosen (steps, delays, response window). */
export function FlowsPage({ t, session }: PageProps) {
  const [flows, setFlows] = useState<Flow[] | null>(null);
  const [channels, setChannels] = useState<string[]>([...KNOWN_CHANNEL_KEYS]);
  const [editing, setEditing] = useState<Flow | null>(null);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [saved, setSaved] = useState(false);
  // Remounts the duration fields when the form is reset or another flow is chosen.
  const [generation, setGeneration] = useState(0);
  const action = useAction();
  const writable = canChange(session);

  const load = () => call<{ flows: Flow[] }>('GET', '/flows').then((r) => setFlows(r.flows), action.setError);
  useEffect(() => {
    void load();
    // Channels added at run time can be steps too: the live list joins the known ones.
    call<{ channels: Array<{ channel: string }> }>('GET', '/channels').then((r) => setChannels([...new Set([...KNOWN_CHANNEL_KEYS, ...r.channels.map((c) => c.channel)])]), action.setError);
  }, []);

  const startEdit = (flow: Flow | null) => {
    setEditing(flow);
    setDraft(
      flow
        ? { name: flow.name, steps: flow.steps.map((s) => ({ channel: s.channel, delayMinutes: s.delayMinutes })), responseWindowMinutes: flow.responseWindowMinutes, isDefault: flow.isDefault }
        : EMPTY,
    );
    setGeneration((g) => g + 1);
    setSaved(false);
    action.setError(null);
  };
  const setStep = (index: number, part: 'channel' | 'delayMinutes', value: Minutes) => setDraft((d) => ({ ...d, steps: d.steps.map((s, i) => (i === index ? { ...s, [part]: value } : s)) }));

  const submit = () => {
    setSaved(false);
    void action.run(async () => {
      const body = {
        name: draft.name.trim(),
        steps: draft.steps.map((s) => ({ channel: s.channel, delayMinutes: s.delayMinutes ?? '' })),
        responseWindowMinutes: draft.responseWindowMinutes,
      };
      if (editing) await call('PUT', `/flows/${encodeURIComponent(editing.id)}`, { body });
      else await call('POST', '/flows', { body: { ...body, isDefault: draft.isDefault || undefined } });
      startEdit(null);
      setSaved(true);
      await load();
    });
  };
  const makeDefault = (flow: Flow) =>
    action.run(async () => {
      setSaved(false);
      await call('POST', `/flows/${encodeURIComponent(flow.id)}/default`);
      await load();
    });

  const title = editing ? t('editFlow', { name: editing.name }) : t('newFlow');
  return (
    <section>
      <ConfigHeader t={t} session={session} title="flows" error={action.error} saved={saved} />
      <ListTable
        t={t}
        items={flows}
        caption="flows"
        empty="noFlows"
        head={
          <>
            <th scope="col">{t('name')}</th>
            <th scope="col">{t('flowSteps')}</th>
            <th scope="col">{t('responseWindow')}</th>
            <th scope="col">{t('defaultFlow')}</th>
            {writable && <td />}
          </>
        }
        row={(f) => (
          <tr key={f.id}>
            <td>{f.name}</td>
            <td>
              <ol>
                {f.steps.map((s) => (
                  <li key={s.order}>
                    {s.channel} (+{formatDuration(t, s.delayMinutes)})
                  </li>
                ))}
              </ol>
            </td>
            <td>{f.responseWindowMinutes === null ? '—' : formatDuration(t, f.responseWindowMinutes)}</td>
            <td>
              {f.isDefault
                ? t('yes')
                : writable && (
                    <button type="button" aria-label={t('makeDefaultNamed', { name: f.name })} onClick={() => makeDefault(f)}>
                      {t('makeDefault')}
                    </button>
                  )}
            </td>
            {writable && (
              <td>
                <button type="button" aria-label={t('editItem', { name: f.name })} onClick={() => startEdit(f)}>
                  {t('edit')}
                </button>
              </td>
            )}
          </tr>
        )}
      />
      {writable && (
        <EditorForm t={t} title={title} busy={action.busy} editing={editing !== null} onSubmit={submit} onCancel={() => startEdit(null)}>
          <label for="flow-name">{t('flowName')}</label>
          <input id="flow-name" required maxLength={200} value={draft.name} onInput={(e) => setDraft({ ...draft, name: e.currentTarget.value })} />
          <fieldset>
            <legend>{t('flowSteps')}</legend>
            <p class="hint">{t('firstStepNow')}</p>
            {draft.steps.map((step, i) => (
              <div key={i} class="filters">
                <label>
                  {t('stepN', { n: i + 1 })}: {t('channel')}
                  <select value={step.channel} onChange={(e) => setStep(i, 'channel', e.currentTarget.value)}>
                    {channels.map((c) => (
                      <option key={c} value={c}>
                        {c}
                      </option>
                    ))}
                  </select>
                </label>
                <DurationInput key={`${generation}:${i}`} t={t} id={`flow-step-${i + 1}-delay`} label={`${t('stepN', { n: i + 1 })}: ${t('delay')}`} minutes={step.delayMinutes} onChange={(v) => setStep(i, 'delayMinutes', v)} />
                {draft.steps.length > 1 && (
                  <button type="button" class="danger" onClick={() => setDraft({ ...draft, steps: draft.steps.filter((_, j) => j !== i) })}>
                    {t('removeStep', { n: i + 1 })}
                  </button>
                )}
              </div>
            ))}
            {draft.steps.length < MAX_FLOW_STEPS && (
              <button type="button" onClick={() => setDraft({ ...draft, steps: [...draft.steps, { channel: 'SMS', delayMinutes: 1440 }] })}>
                {t('addStep')}
              </button>
            )}
          </fieldset>
          <DurationInput key={`${generation}:window`} t={t} id="flow-window" label={t('responseWindow')} minutes={draft.responseWindowMinutes} allowEmpty onChange={(v) => setDraft((d) => ({ ...d, responseWindowMinutes: v }))} />
          <p id="flow-window-hint" class="hint">
            {t('flowResponseWindowHint')} ({formatDuration(t, 0)}–{formatDuration(t, MAX_RESPONSE_WINDOW_MINUTES)})
          </p>
          {!editing && (
            <label class="check">
              <input type="checkbox" checked={draft.isDefault} onChange={(e) => setDraft({ ...draft, isDefault: e.currentTarget.checked })} /> {t('createAsDefault')}
            </label>
          )}
        </EditorForm>
      )}
    </section>
  );
}

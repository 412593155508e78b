import { useState } from 'preact/hooks';
import type { MessageKey, Translate } from './i18n';

/*
 * Delays, response windows and targets are minutes in the API; people think in minutes, hours or days.
 * The console shows and takes them in the unit the person chooses ("1 day", not "1440"), in words with
 * the language's plural forms ("+1 minute", "2 часа").
 */

export const UNITS = [
  ['minutes', 1],
  ['hours', 60],
  ['days', 1440],
] as const;
export type Unit = (typeof UNITS)[number][0];

/** The largest unit a number of minutes is a whole number of. */
export function unitOf(minutes: number): Unit {
  if (minutes !== 0 && minutes % 1440 === 0) return 'days';
  if (minutes !== 0 && minutes % 60 === 0) return 'hours';
  return 'minutes';
}

const factorOf = (unit: Unit) => UNITS.find(([name]) => name === unit)![1];

/** `3 days`, `1 hour`, `5 минут`: in the largest whole unit, with the language's plural form. */
export function formatDuration(t: Translate, minutes: number): string {
  const unit = unitOf(minutes);
  const count = minutes / factorOf(unit);
  const form = new Intl.PluralRules(document.documentElement.lang === 'ru' ? 'ru' : 'en').select(count);
  return t(`${unit}_${form === 'one' ? 'one' : form === 'few' ? 'few' : 'many'}` as MessageKey, { count });
}

/**
 * A number and its unit; `onChange` gets minutes, or the text as typed when it is not a number (the API
 * refuses that by field, so the person sees why).
 */
export function DurationInput(props: { t: Translate; id: string; label: string; minutes: number | string | null; onChange: (minutes: number | string | null) => void; allowEmpty?: boolean }) {
  const { t } = props;
  const initial = typeof props.minutes === 'number' ? unitOf(props.minutes) : 'minutes';
  const [unit, setUnit] = useState<Unit>(initial);
  const [text, setText] = useState(typeof props.minutes === 'number' ? String(props.minutes / factorOf(initial)) : (props.minutes ?? ''));
  const emit = (value: string, chosen: Unit) => {
    if (value.trim() === '') return props.onChange(props.allowEmpty ? null : value);
    const n = Number(value);
    props.onChange(Number.isFinite(n) ? Math.round(n * factorOf(chosen)) : value);
  };
  return (
    <div class="inline duration">
      <label for={props.id}>{props.label}</label>
      <input
        id={props.id}
        inputMode="numeric"
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value);
          emit(e.currentTarget.value, unit);
        }}
      />
      <select
        aria-label={`${props.label}: ${t('unit')}`}
        value={unit}
        onChange={(e) => {
          const chosen = e.currentTarget.value as Unit;
          setUnit(chosen);
          emit(text, chosen);
        }}
      >
        {UNITS.map(([name]) => (
          <option key={name} value={name}>
            {t(`unit_${name}` as MessageKey)}
          </option>
        ))}
      </select>
    </div>
  );
}

import { waitFor } from '@rrs/testkit';
import { FakeProfiles, LOCATION, ORG, startHarness, type Harness } from './harness';

/**
 * The spec: MAX and TELEGRAM messages carry "text from the SMS template, first line is the location
 * name". The organization's profile lists a template for every known channel (contacts shows MAX and
 * TELEGRAM their own defaults), yet every path to a messenger must write with the SMS template: a
 * direct send, a flow step, and an SMS step rerouted for lack of balance.
 */
describe('MAX and TELEGRAM messages use the SMS template', () => {
  let h: Harness;
  const SMS_TEXT = 'Our own SMS: rate {{location}} at {{link}}';

  beforeAll(async () => {
    h = await startHarness({
      minuteMs: 40,
      sender: { channels: ['SMS', 'MAX', 'TELEGRAM'], decide: (step) => (step.channel === 'SMS' ? 'STEP_OUTCOME_NO_BALANCE' : 'STEP_OUTCOME_SENT') },
    });
    const profile = FakeProfiles.profile(ORG);
    profile.templates = [
      ...profile.templates.filter((template) => template.channel !== 'SMS'),
      { channel: 'SMS', subject: '', body: SMS_TEXT },
      { channel: 'MAX', subject: '', body: 'Messenger default {{link}}' },
      { channel: 'TELEGRAM', subject: '', body: 'Messenger default {{link}}' },
    ];
    h.profiles.byOrganization.set(ORG, profile);
  });
  afterAll(() => h.close());

  const start = async (input: { channel?: string; flowId?: string }) =>
    (await h.scheduler.cascades.start({ organizationId: ORG, locationId: LOCATION, name: '', flowId: input.flowId ?? '', channel: input.channel ?? '', externalId: '', recipients: [{ name: 'Ira', email: '', phone: '+79161230000' }] })).result.id;
  const messengerSteps = (cascadeId: string) => waitFor(() => {
    const steps = h.sender.received.filter((step) => step.cascadeId === cascadeId && step.channel !== 'SMS');
    return steps.length ? steps : undefined;
  }, { what: `the messenger step of ${cascadeId}` });

  it.each(['MAX', 'TELEGRAM'])('a direct %s send', async (channel) => {
    const [step] = await messengerSteps(await start({ channel }));
    expect(step).toMatchObject({ channel, template: { subject: '', body: SMS_TEXT }, location: expect.objectContaining({ name: 'Coffee on Tverskaya' }) });
  });

  it('a TELEGRAM flow step', async () => {
    const flow = await h.scheduler.flows.create({ organizationId: ORG, name: 'telegram', isDefault: false, steps: [{ channel: 'TELEGRAM', delayMinutes: 0 }] });
    const [step] = await messengerSteps(await start({ flowId: flow.id }));
    expect(step).toMatchObject({ channel: 'TELEGRAM', template: { body: SMS_TEXT } });
  });

  it('an SMS step rerouted to MAX for lack of balance', async () => {
    const [step] = await messengerSteps(await start({ channel: 'SMS' }));
    expect(step).toMatchObject({ channel: 'MAX', template: { body: SMS_TEXT } });
  });
});

import { randomUUID } from 'node:crypto';
import { createPool, migrate, type Pool } from '@rrs/runtime';
import { createTestDatabase, historyScans, recordStatements, testLogger, type StatementRecorder, type TestDatabase } from '@rrs/testkit';
import { MIGRATIONS_DIR, SCHEMA } from '../src';
import { ChatLinks } from '../src/chatLinks';

const SEEDED = 150_000;

/**
 * Costs that do not grow with history (issue 35): every statement the messenger runs on its bots' chat
 * links (a deep link linking a chat, the send path's lookup by phone, an incoming message's by chat, a
 * STOP unlinking, an erased person's links deleted) is EXPLAINed on a year of links of many
 * organizations; none may read `bot_chats` whole. (The send log is checked in sender-kit.)
 */
describe('history plans: no statement of the messenger reads its chat links whole', () => {
  let db: TestDatabase;
  let pool: Pool;
  let recorder: StatementRecorder;

  beforeAll(async () => {
    recorder = recordStatements({ schema: SCHEMA });
    db = await createTestDatabase();
    pool = createPool({ url: db.url, schema: SCHEMA });
    await migrate(pool, { schema: SCHEMA, dir: MIGRATIONS_DIR, logger: testLogger() });
    recorder.start();
  });
  afterAll(async () => {
    recorder.restore();
    await pool.end();
    await db.drop();
  });

  it('every statement on the chat links reads them through an index', async () => {
    const links = new ChatLinks(pool);
    const organizationId = randomUUID();
    const recipientId = randomUUID();
    const link = { channel: 'TELEGRAM', organizationId, phone: '+79161234567', chatId: '42', recipientId, locale: 'ru' as const };
    await links.link(link);
    expect(await links.find('TELEGRAM', organizationId, link.phone)).toMatchObject({ chatId: '42' });
    expect(await links.ofChat('TELEGRAM', '42')).toHaveLength(1);
    await links.unlink(link, 'stop_command');
    expect(await links.forgetRecipients(organizationId, [recipientId])).toBe(1);

    recorder.stop();
    // A year of links: a person in 3 linking a bot, over many organizations, one in ten since unlinked.
    await pool.query(`INSERT INTO bot_chats (channel, organization_id, phone, chat_id, recipient_id, linked_at, unlinked_at, unlink_reason)
                      SELECT CASE WHEN g % 2 = 0 THEN 'TELEGRAM' ELSE 'MAX' END, o.id, '+7916' || lpad(g::text, 7, '0'), 'chat-' || g, gen_random_uuid(), at,
                             CASE WHEN g % 10 = 0 THEN at + interval '1 day' END, CASE WHEN g % 10 = 0 THEN 'stop_command' END
                        FROM generate_series(1, ${SEEDED}) g
                        JOIN (SELECT gen_random_uuid() AS id, n FROM generate_series(0, 199) n) o ON o.n = g % 200,
                        LATERAL (SELECT now() - interval '1 year' + g * (interval '1 year' / ${SEEDED}) AS at) t`);
    await pool.query('ANALYZE');
    expect(await historyScans(db.url, recorder.statements, ['bot_chats'], { searchPath: SCHEMA })).toEqual([]);
  });
});

// Schema migrations of a PostgreSQL store (usage records, stored responses):
// a `<name>_migrations` table records the versions applied; each version runs
// once, in its own transaction, under an advisory lock on `name`, so that
// several gateway processes starting together do not race.
import type pg from 'pg';

/** Apply the `steps` (version n is steps[n - 1]) not yet recorded in `<name>_migrations`. */
export async function migrate(client: pg.ClientBase, name: string, steps: string[]): Promise<void> {
  await client.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
  try {
    await client.query(`CREATE TABLE IF NOT EXISTS ${name}_migrations (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`);
    const done = new Set((await client.query<{ version: number }>(`SELECT version FROM ${name}_migrations`)).rows.map((r) => r.version));
    for (let v = 1; v <= steps.length; v++) {
      if (done.has(v)) continue;
      await client.query('BEGIN');
      try {
        await client.query(steps[v - 1]);
        await client.query(`INSERT INTO ${name}_migrations (version) VALUES ($1)`, [v]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw err;
      }
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(hashtext($1))', [name]).catch(() => undefined);
  }
}

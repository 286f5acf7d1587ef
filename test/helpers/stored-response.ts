// One stored response, as the responses stores keep it (src/store/responses.ts):
// the SQLite and the PostgreSQL store tests put and read the same shape.
import type { StoredResponse } from '../../src/store/responses.js';

/**
 * A completed response `id` of `owner`, continuing `prev`, whose output is one
 * assistant message per id of `itemIds` (text `text of <item id>`). The
 * response body carries two extra members in reverse alphabetical order, so
 * that a store which reorders or drops members is caught.
 */
export function storedResponse(id: string, owner = 'alice', prev: string | null = null, itemIds = ['msg_1']): StoredResponse {
  return {
    id,
    owner,
    model: 'openai/gpt-4.1-mini',
    created_at: 1_700_000_000,
    previous_response_id: prev,
    input: [{ type: 'message', role: 'user', content: `hi from ${id}` }],
    output: itemIds.map((i) => ({ type: 'message', id: i, role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `text of ${i}`, annotations: [] }] })),
    response: { id, object: 'response', status: 'completed', output: [], z_last: 1, a_first: 2 },
  };
}

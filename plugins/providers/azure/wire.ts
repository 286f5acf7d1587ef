// Azure OpenAI's wire format is OpenAI's (../openai/wire.ts) with
// content-filter annotations
// (https://learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter)
// on answers, chunks, images and error bodies: those are typed here.

/** Per category (hate, sexual, violence, self_harm, jailbreak...): what the filter found. */
export type FilterResult = Record<string, { filtered?: boolean; severity?: string; detected?: boolean } | undefined>;

/** A completion or chunk with its annotations. */
export type Annotated = { prompt_filter_results?: unknown; choices?: { content_filter_results?: unknown }[] };

/** An error body: OpenAI's, plus what the content filter decided (chat: `innererror`, images: `inner_error`). */
export interface AzureErrorBody {
  error?: {
    code?: string;
    message?: string;
    param?: string;
    innererror?: { code?: string; content_filter_result?: FilterResult };
    inner_error?: { code?: string; content_filter_results?: FilterResult };
  };
}

/**
 * The fake's token ids. A content token's id is its five base-36 characters read as a number; a prompt's
 * ids are its characters, numbered past every token id. So a token-id prompt reads back as the prompt's
 * text (a chat's: its messages as JSON) followed by the tokens already sampled.
 */
export function tokenIdOf(token: string): number {
  return parseInt(token.slice(1), 36);
}

const PROMPT_ID_BASE = 36 ** 5;

export function promptIdsOf(text: string): number[] {
  return [...text].map((c) => PROMPT_ID_BASE + c.codePointAt(0)!);
}

/** A prompt of prompt ids then token ids, read back; null for any other list (it stands for its ids' text). */
export function decodeIds(ids: readonly number[]): { text: string; tokens: string[] } | null {
  let at = 0;
  while (at < ids.length && ids[at]! >= PROMPT_ID_BASE) at += 1;
  if (at === 0 || ids.slice(at).some((id) => id >= PROMPT_ID_BASE)) return null;
  const text = String.fromCodePoint(...ids.slice(0, at).map((id) => id - PROMPT_ID_BASE));
  return { text, tokens: ids.slice(at).map((id) => ' ' + id.toString(36).padStart(5, '0')) };
}

import { createHash } from 'node:crypto';
import type { TurnKind } from '@robustrl/contracts';
import { PrefixTurn } from './trajectory-recorder';

/**
 * How one request of an agent loop maps onto the recorded trajectory (pure, no I/O).
 *
 * Chat: the prompt is the leading messages before the first assistant message; every later message is
 * a turn: an assistant message is `tool-call` when it carries tool calls, else `model-output`; any
 * other message (`tool`, or a `user` message with environment feedback) is a `tool-result`.
 * Completions: the prompt is the first request's prompt; a turn is a text segment: the model's
 * output (`model-output`) or what the agent appended after it (`tool-result`).
 *
 * A request holds the whole conversation so far. Compared with the stored prefix it is one of:
 *  - `generate`: it extends the stored turns (possibly by new tool results, which are appended
 *    first), and its answer becomes turn `outputIndex`;
 *  - `replay`: it is a retry of a request whose answer is already stored: the stored answer is
 *    returned, nothing is generated or stored again (paper §5.2.2: nothing generated is re-run);
 *  - `conflict`: it contradicts the stored turns (an edited history): refused, so the training data
 *    never mixes two histories.
 */
export interface TurnDraft {
  kind: TurnKind;
  content: unknown;
}

export type TurnPlan =
  | { kind: 'generate'; append: Array<TurnDraft & { turnIndex: number }>; outputIndex: number }
  | { kind: 'replay'; turn: PrefixTurn }
  | { kind: 'conflict'; message: string };

export interface ChatMessageLike {
  role: string;
  content?: unknown;
  tool_calls?: Array<{ id?: string; type?: string; function?: { name?: string; arguments?: string } }>;
  tool_call_id?: string;
  name?: string;
}

export const isOutputKind = (kind: TurnKind) => kind === 'model-output' || kind === 'tool-call';

export function splitChatConversation(messages: readonly ChatMessageLike[]): { prompt: ChatMessageLike[]; turns: TurnDraft[] } {
  const firstAssistant = messages.findIndex((m) => m.role === 'assistant');
  const cut = firstAssistant < 0 ? messages.length : firstAssistant;
  return { prompt: messages.slice(0, cut), turns: messages.slice(cut).map(chatTurnOf) };
}

export function chatTurnOf(message: ChatMessageLike): TurnDraft {
  if (message.role !== 'assistant') return { kind: 'tool-result', content: message };
  return { kind: message.tool_calls && message.tool_calls.length > 0 ? 'tool-call' : 'model-output', content: message };
}

/**
 * What identifies a chat message for comparison and turn ids: clients echo an assistant message back
 * with small differences (`content: null` vs `''`, extra `refusal`/`reasoning_content` fields, a
 * missing `type`), none of which change the conversation.
 */
export function chatMessageKey(message: ChatMessageLike): string {
  const content = message.content === null || message.content === undefined ? '' : message.content;
  const calls = (message.tool_calls ?? []).map((c) => [c.function?.name ?? '', c.function?.arguments ?? '']);
  return JSON.stringify([message.role, content, calls, message.tool_call_id ?? null, message.name ?? null]);
}

export function turnKey(content: unknown): string {
  return typeof content === 'string' ? JSON.stringify(content) : chatMessageKey(content as ChatMessageLike);
}

/**
 * Turn id = trajectory + index + content hash: a retried request re-derives the same id; a different turn
 * cannot. After a restart from the prompt the attempt is part of the id too: the store keeps the dropped
 * attempt's ids as idempotency keys, and the new attempt may well produce the same content at the same
 * index (a deterministic tool, greedy sampling) — that turn is new, not a duplicate.
 */
export function turnIdOf(trajectoryId: string, turnIndex: number, content: unknown, attempt = 0): string {
  const hash = createHash('sha256').update(turnKey(content)).digest('hex').slice(0, 16);
  return attempt === 0 ? `${trajectoryId}#${turnIndex}#${hash}` : `${trajectoryId}#a${attempt}#${turnIndex}#${hash}`;
}

/** Compare the request's turns with the stored ones (both in index order). */
export function planTurns(requestTurns: readonly TurnDraft[], stored: readonly PrefixTurn[]): TurnPlan {
  const n = requestTurns.length;
  const m = stored.length;
  for (let i = 0; i < Math.min(n, m); i++) {
    if (turnKey(requestTurns[i].content) !== turnKey(stored[i].content)) {
      return { kind: 'conflict', message: `turn ${i} of the request differs from the stored turn ${i}: the trajectory's history cannot change` };
    }
  }
  if (m <= n) return { kind: 'generate', append: requestTurns.slice(m).map((t, i) => ({ ...t, turnIndex: m + i })), outputIndex: n };
  if (m === n + 1 && isOutputKind(stored[n].kind)) return { kind: 'replay', turn: stored[n] };
  return { kind: 'conflict', message: `the request holds ${n} turns but ${m} are stored: it is older than the trajectory` };
}

/**
 * Completions: split the request's prompt along the stored segments. `base` is the trajectory's
 * first prompt when known; otherwise it is inferred from where the stored segments sit in the prompt.
 */
export function splitCompletionPrompt(
  prompt: string,
  stored: readonly PrefixTurn[],
  base: string | undefined,
): { base: string; turns: TurnDraft[] } | { conflict: string } {
  const texts = stored.map((t) => (typeof t.content === 'string' ? t.content : ''));
  if (base === undefined) {
    if (stored.length === 0) base = prompt;
    else {
      const all = texts.join('');
      const at = prompt.lastIndexOf(all);
      const allButLast = texts.slice(0, -1).join('');
      if (at >= 0 && all !== '') base = prompt.slice(0, at);
      else if (prompt.endsWith(allButLast)) base = prompt.slice(0, prompt.length - allButLast.length);
      else return { conflict: 'the prompt does not contain the stored turns' };
    }
  }
  if (!prompt.startsWith(base)) return { conflict: "the prompt does not start with the trajectory's prompt" };
  let rest = prompt.slice(base.length);
  const turns: TurnDraft[] = [];
  for (let i = 0; i < stored.length && rest !== ''; i++) {
    if (!rest.startsWith(texts[i])) break;
    turns.push({ kind: stored[i].kind, content: texts[i] });
    rest = rest.slice(texts[i].length);
  }
  if (rest !== '') turns.push({ kind: 'tool-result', content: rest });
  return { base, turns };
}

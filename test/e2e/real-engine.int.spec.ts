import { randomBytes } from 'node:crypto';
import type { TokenSpan } from '@robustrl/contracts';
import { RequestManagerModule } from '@robustrl/request-manager';
import { EnginePool, HttpTrajectoryRecorder, OpenAiRouter, trajectoryIdOf } from '@robustrl/rollout-manager';
import { httpAuthFromEnv, RunningService, runService } from '@robustrl/service-kit';
import { freshDatabaseUrl } from '@robustrl/testing/databases';
import { EngineTap, TappedRequest } from '@robustrl/testing/engine-tap';
import { LlamaEngine, startLlamaEngines } from '@robustrl/harness';
import { ChatMessage } from '@robustrl/testing/fake-inference-engine';
import { streamChat } from '@robustrl/testing/openai-client';

/**
 * The router on real inference engines: four llama.cpp servers (deploy/local/llama.sh, a tiny
 * random model), each behind a tap that writes down the token ids it forwards — the ground truth of what
 * the engines sampled. 32 agent loops of three model turns each stream through the router, which records
 * every turn in the request manager's store on the real PostgreSQL server. Mid-stream, one engine is
 * SIGKILLed and another SIGSTOPped (it hangs: its sockets stay open and say nothing). Every trajectory
 * completes, and for every model turn the stored token ids are exactly the concatenation of what the
 * engines sent for it — none lost, none repeated — with each span's engine recorded, continued on the
 * next engine from the sampled token ids (llama.cpp takes a token prompt).
 */
jest.setTimeout(240_000);

const TRAJECTORIES = 32;
const MODEL_TURNS = 3;
const MAX_TOKENS = 48;

describe('router on real llama.cpp engines: one killed and one hung mid-stream (real PostgreSQL)', () => {
  const jobId = 'job-real-engine';
  const storeToken = `store-token-${randomBytes(8).toString('hex')}`;
  const authorized = { authorization: `Bearer ${storeToken}` };
  let database: { url: string; drop(): Promise<void> };
  let service: RunningService;
  let engines: LlamaEngine[];
  let taps: EngineTap[];
  let pool: EnginePool;
  let router: OpenAiRouter;
  let storeUrl: string;

  beforeAll(async () => {
    database = await freshDatabaseUrl('robustrl_real_engine');
    service = await runService(
      {
        serviceName: 'e2e-real-engine',
        bus: { adapter: 'in-process' },
        store: { kind: 'postgres', url: database.url },
        httpPort: 0,
        httpAuth: httpAuthFromEnv({ ROBUSTRL_HTTP_TOKENS: storeToken }, '127.0.0.1'),
      },
      [RequestManagerModule],
      { logLevels: ['error'], jsonBodyLimit: '64mb' },
    );
    storeUrl = (await service.app.getUrl()).replace('[::1]', '127.0.0.1');
    // A slot for every stream an engine can be given (32 loops over the 2 engines left): a request queued
    // behind busy slots says nothing until it is scheduled, and would be taken for a hang.
    engines = await startLlamaEngines(4, { slots: TRAJECTORIES / 2 });
    taps = await Promise.all(engines.map((e) => EngineTap.start(e.id, e.url)));
    pool = new EnginePool(
      taps.map((t) => ({ id: t.id, baseUrl: t.url, kind: 'llama.cpp' as const, weightVersion: 7 })),
      { probeIntervalMs: 0, probeTimeoutMs: 500 },
    );
    router = new OpenAiRouter({
      pool,
      recorder: new HttpTrajectoryRecorder(storeUrl, { token: storeToken }),
      // A hung engine is given up on after 8 s without a byte (the default is minutes: prefills can be
      // long). Shorter, a loaded machine's merely slow engine is taken for hung now and then: with 4 s, a
      // CI run beside other suites had the one engine left answer a new stream's headers too late.
      upstreamIdleTimeoutMs: 8_000,
      logger: { info: () => undefined, warn: () => undefined, error: (m, f) => process.stderr.write(`router: ${m} ${JSON.stringify(f)}\n`) },
    });
    await router.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await router?.close();
    await pool?.stop();
    for (const e of engines ?? []) {
      e.resume();
      e.kill();
    }
    await Promise.all((engines ?? []).map((e) => e.exited));
    for (const t of taps ?? []) await t.close();
    await service?.stop();
    await database?.drop();
  });

  it(`${TRAJECTORIES} multi-turn trajectories: every token the engines sampled is stored once, span by span`, async () => {
    const [killed, hung] = engines;
    const [killedTap, hungTap] = taps;
    // Each victim goes down inside a stream, after its fourth token event: the stream is open and half
    // sent. The tap goes down with it, or a loaded machine's engine, far ahead of this process, would have
    // written the rest of its answer into the socket already.
    let killedAt: TappedRequest | null = null;
    let hungAt: TappedRequest | null = null;
    killedTap.onTokens = (r) => {
      if (killedAt === null && r.tokenEvents >= 4) {
        killedAt = r;
        killed.kill();
        killedTap.cut();
      }
    };
    hungTap.onTokens = (r) => {
      // Well before the stream's last token, so there is something left to continue.
      if (hungAt === null && killedAt !== null && r.tokenEvents >= 4 && r.tokenEvents <= MAX_TOKENS - 16) {
        hungAt = r;
        hung.hang();
        hungTap.freeze();
      }
    };

    const identity = (i: number) => ({
      'x-robustrl-job': jobId,
      'x-robustrl-prompt': `task-${i}`,
      'x-robustrl-sample': '0',
      'x-robustrl-batch': 'b1',
      'x-robustrl-step': '1',
    });
    const loop = async (i: number): Promise<ChatMessage[]> => {
      const messages: ChatMessage[] = [{ role: 'user', content: `solve task ${i} step by step` }];
      for (let turn = 0; turn < MODEL_TURNS; turn++) {
        const answer = await streamChat(router.url, { model: 'tiny', messages, stream: true, max_tokens: MAX_TOKENS, temperature: 0.8 }, identity(i));
        if (!answer.done) throw new Error(`trajectory ${i} turn ${turn}: the stream did not end with [DONE]`);
        messages.push({ role: 'assistant', content: answer.text });
        if (turn < MODEL_TURNS - 1) messages.push({ role: 'user', content: `observation ${turn} of task ${i}` });
      }
      return messages;
    };
    const conversations = await Promise.all(Array.from({ length: TRAJECTORIES }, (_, i) => loop(i)));

    expect(killedAt).not.toBeNull();
    expect(hungAt).not.toBeNull();
    expect(router.stats.failovers).toBeGreaterThanOrEqual(2);
    expect(router.stats.recordingErrors).toBe(0);

    const allTapped = taps.flatMap((t) => t.requests.map((r) => ({ ...r, engine: t.id }))).sort((a, b) => a.sequence - b.sequence);
    const turnsSpans: TokenSpan[][] = [];
    for (const [i, conversation] of conversations.entries()) {
      const trajectoryId = trajectoryIdOf(jobId, `task-${i}`, 0);
      const stored = (await (await fetch(`${storeUrl}/v1/trajectories/${encodeURIComponent(trajectoryId)}`, { headers: authorized })).json()) as {
        turns: Array<{ turnIndex: number; kind: string; content: ChatMessage; rolloutId: string | null; tokens: number; spans: TokenSpan[] | null }>;
      };
      expect(stored.turns.map((t) => t.kind)).toEqual(['model-output', 'tool-result', 'model-output', 'tool-result', 'model-output']);
      expect(stored.turns.map((t) => t.content.content)).toEqual(conversation.slice(1).map((m) => m.content));
      for (const turn of stored.turns.filter((t) => t.kind === 'model-output')) {
        // What the engines sent for this turn, attempt by attempt, through their taps.
        const tapped = allTapped.filter((r) => r.requestId.startsWith(`${trajectoryId}/${turn.turnIndex}/`));
        const spans = turn.spans ?? [];
        const received = receivedFrom(
          tapped.filter((r) => r.ids.length > 0),
          spans,
        );
        // (`attempts` is on both sides: shown when the spans differ, not compared.)
        const tried = tapped.map((r) => `${r.engine} ${r.requestId} ${r.path} ${r.ended} ${r.ids.join(',')}`);
        expect({
          turn: `${trajectoryId}#${turn.turnIndex}`,
          attempts: tried,
          spans: spans.map((s) => ({ engine: s.rolloutId, context: s.context, ids: s.tokenIds })),
        }).toEqual({
          turn: `${trajectoryId}#${turn.turnIndex}`,
          attempts: tried,
          spans: received.map((r, i) => ({ ...r, context: spans[i]?.context })),
        });
        const shape = spans.map((s) => `${s.rolloutId}:${s.context}:${s.tokenIds.length}/${s.sampled}`);
        expect({ shape, tokens: turn.tokens }).toEqual({ shape, tokens: received.flatMap((r) => r.ids).length });
        for (const s of spans) {
          expect(s.logprobs).toHaveLength(s.tokenIds.length);
          expect(s.logprobs.filter((v) => !(typeof v === 'number' && v <= 0))).toEqual([]);
          expect(s.weightVersion).toBe(7);
          // The engine's own count agrees: no id left out.
          expect(s.sampled).toBe(s.tokenIds.length);
        }
        expect(spans[0]?.context).toBe('prompt');
        turnsSpans.push(spans);
      }
    }
    // Both victims' half-sent streams were continued elsewhere from their exact token ids.
    // The victim's span need not be a turn's first: the engine hung may have been continuing a stream of
    // the killed one. (When not, the turns the victim took part in are shown.)
    const continued = (victim: string) => {
      const involved = turnsSpans.filter((spans) => spans.slice(0, -1).some((s) => s.rolloutId === victim));
      const ok = involved.some((spans) =>
        spans.slice(spans.findIndex((s) => s.rolloutId === victim) + 1).every((s) => s.context === 'tokens' && s.rolloutId !== victim),
      );
      const shapes = involved.map((spans) => spans.map((s) => `${s.rolloutId}:${s.context}:${s.tokenIds.length}`));
      return { victim, continuedFromTokens: ok, ...(ok ? {} : { involved: shapes }) };
    };
    expect(continued(killed.id)).toEqual({ victim: killed.id, continuedFromTokens: true });
    expect(continued(hung.id)).toEqual({ victim: hung.id, continuedFromTokens: true });
    // llama.cpp takes a token prompt: nothing was continued from re-tokenised text.
    expect(turnsSpans.flat().filter((s) => s.context === 'text')).toEqual([]);
  });
});

/**
 * The spans a turn's record must hold, given what the taps forwarded for it, attempt by attempt: one
 * span per attempt, its ids exactly the attempt's — except for an attempt the router hung up on (its
 * idle timeout: the hung engine, or on a loaded machine one that was only slow). Events in flight when
 * it hung up were forwarded by the tap but never read, so the router holds a prefix of them, possibly
 * none (then the attempt has no span). The tap sees the hang-up when the caller closes first; when the
 * engine's last events crossed the router's hang-up, the tap saw a complete answer, yet the router went
 * on to another attempt — which it does only for an answer it did not get.
 */
function receivedFrom(attempts: ReadonlyArray<TappedRequest & { engine: string }>, spans: readonly TokenSpan[]): Array<{ engine: string; ids: number[] }> {
  const received: Array<{ engine: string; ids: number[] }> = [];
  for (const [i, attempt] of attempts.entries()) {
    const hungUpOn = attempt.ended === 'abandoned' || (attempt.ended === 'done' && i < attempts.length - 1);
    if (!hungUpOn) {
      received.push({ engine: attempt.engine, ids: attempt.ids });
      continue;
    }
    const span = spans[received.length];
    const prefix = span !== undefined && span.rolloutId === attempt.engine && span.tokenIds.length > 0 && span.tokenIds.every((id, k) => attempt.ids[k] === id);
    if (prefix) received.push({ engine: attempt.engine, ids: span.tokenIds });
  }
  return received;
}

/** Waiting in the infrastructure fault campaign (infra-chaos.ts). */
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(what: string, condition: () => Promise<boolean>, timeoutMs = 60_000, everyMs = 500): Promise<true> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

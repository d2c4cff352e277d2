const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The first value `condition` gives that is neither undefined nor false, asked every `everyMs`; throws naming `what` after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  condition: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  everyMs = 500,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`);
    await sleep(everyMs);
  }
}

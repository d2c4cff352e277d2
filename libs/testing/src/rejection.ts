/** The error a promise rejects with, checked to be an instance of `type` (fails the test otherwise). */
export async function rejectionOf<E extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => E): Promise<E> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(type);
  return error as E;
}

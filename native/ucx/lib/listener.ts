/** A sockaddr listener of a worker (C++: listener.cc). */
import type { NativeListener } from './native';

export class Listener {
  /** @internal */
  constructor(private readonly native: NativeListener) {}
  /** the bound port (useful with port 0) */
  get port(): number {
    return this.native.port;
  }
  close(): void {
    this.native.close();
  }
}

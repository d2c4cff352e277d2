import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';

/**
 * Hosts on one machine: a network namespace per host, each with its own address on a bridge of the
 * run's own (veth pairs), so what crosses between "machines" — a trainer group's rendezvous, UCX
 * weight pulls, the router's requests to an engine — crosses interfaces, and a host's 127.0.0.1 is its
 * own. The root namespace holds the bridge's address (`gateway`): servers that every host must reach
 * (the broker, the control plane's HTTP APIs) listen there. Root only (CAP_NET_ADMIN); see
 * ../shared/reference/deploy-testing.md §4 for what was measured on our machines.
 *
 * Only the network is separate: hosts share the file system, /dev/shm, pids and the host name, so a
 * test still reads every host's logs, and kills processes by pid.
 */
export interface NetnsHost {
  name: string;
  /** The namespace (`ip netns exec <netns> …`). */
  netns: string;
  /** Its address on the bridge. */
  address: string;
  /** The root-side end of its veth pair: down cuts the host off the network, up joins it again. */
  link: string;
}

export class NetnsHosts {
  private readonly hosts = new Map<string, NetnsHost>();
  private destroyed = false;

  private constructor(
    /** Short, unique per run: interface names are at most 15 characters. */
    private readonly tag: string,
    private readonly subnet: number,
    readonly bridge: string,
  ) {}

  /** Why hosts cannot be made here, or null when they can (root and iproute2). */
  static unavailable(): string | null {
    if (process.platform !== 'linux') return `network namespaces need Linux, this is ${process.platform}`;
    if (typeof process.getuid === 'function' && process.getuid() !== 0) return 'network namespaces need root (CAP_NET_ADMIN)';
    if (!['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].some((p) => existsSync(p))) return "iproute2's ip is not installed";
    return null;
  }

  /**
   * A bridge `10.<subnet>.0.1/24` of the run's own, on a subnet among 10.200–10.249 no interface uses.
   * First it removes what runs killed without cleaning up left behind (their namespaces name their pid).
   */
  static create(): NetnsHosts {
    const why = NetnsHosts.unavailable();
    if (why) throw new Error(`cannot make hosts: ${why}`);
    removeAbandoned();
    const tag = randomBytes(3).toString('hex');
    const used = new Set([...ipOut('-4', '-o', 'addr').matchAll(/inet 10\.(\d+)\./g)].map((m) => Number(m[1])));
    const free = Array.from({ length: 50 }, (_, i) => 200 + i).filter((n) => !used.has(n));
    if (free.length === 0) throw new Error('no free 10.200-249 subnet for a bridge');
    const subnet = free[randomBytes(1)[0] % free.length];
    const hosts = new NetnsHosts(tag, subnet, `rb${tag}`);
    ip('link', 'add', hosts.bridge, 'type', 'bridge');
    ip('addr', 'add', `${hosts.gateway}/24`, 'dev', hosts.bridge);
    ip('addr', 'add', `${hosts.brokerAddress}/24`, 'dev', hosts.bridge);
    ip('link', 'set', hosts.bridge, 'up');
    return hosts;
  }

  /**
   * A second address of the bridge, for the broker alone: a host can be cut from the broker while it
   * still reaches the control plane's HTTP APIs and the router at the gateway, and the other way round.
   */
  get brokerAddress(): string {
    return `10.${this.subnet}.0.2`;
  }

  /** The bridge's address in the root namespace: where hosts reach the servers that run there. */
  get gateway(): string {
    return `10.${this.subnet}.0.1`;
  }

  /** Adds host `name` (its address `10.<subnet>.0.<10+n>`), or answers the one of that name. */
  add(name: string): NetnsHost {
    const known = this.hosts.get(name);
    if (known) return known;
    const n = this.hosts.size + 10;
    if (n > 250) throw new Error('at most 240 hosts on one bridge');
    const host: NetnsHost = { name, netns: `robustrl-${process.pid}-${this.tag}-${n}`, address: `10.${this.subnet}.0.${n}`, link: `rv${this.tag}${n}` };
    ip('netns', 'add', host.netns);
    // `ip netns exec` mounts /etc/netns/<name>/* over /etc: a name server that refuses at once, since
    // none is reachable from the bridge (a lookup — Python's getfqdn on bind — would wait out its timeouts).
    mkdirSync(`/etc/netns/${host.netns}`, { recursive: true });
    writeFileSync(`/etc/netns/${host.netns}/resolv.conf`, 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n');
    ip('link', 'add', host.link, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', host.netns);
    ip('link', 'set', host.link, 'master', this.bridge, 'up');
    ip('-n', host.netns, 'addr', 'add', `${host.address}/24`, 'dev', 'eth0');
    ip('-n', host.netns, 'link', 'set', 'eth0', 'up');
    ip('-n', host.netns, 'link', 'set', 'lo', 'up');
    ip('-n', host.netns, 'route', 'add', 'default', 'via', this.gateway);
    this.hosts.set(name, host);
    return host;
  }

  get(name: string): NetnsHost | undefined {
    return this.hosts.get(name);
  }

  /** `command args…` run on host `name`: the argv to spawn. */
  wrap(name: string, command: string, args: readonly string[]): { command: string; args: string[] } {
    const host = this.hosts.get(name);
    if (!host) throw new Error(`no host ${name}`);
    return { command: 'ip', args: ['netns', 'exec', host.netns, command, ...args] };
  }

  /** Cuts host `name` off the network (its link down): its peers see timeouts, not refusals. */
  cut(name: string): void {
    ip('link', 'set', this.need(name).link, 'down');
  }

  heal(name: string): void {
    ip('link', 'set', this.need(name).link, 'up');
    this.healFrom(name);
  }

  /**
   * Cuts host `name` from part of the network by blackhole routes in its namespace (this kernel has no
   * packet filter: no iptables, no tc actions): from the broker only; from the control plane (the
   * gateway: its HTTP APIs and the router, whose requests the host can no longer answer) with the
   * broker still reachable; or from its peers, the other hosts. A blackholed packet fails at once in the
   * sender rather than vanishing on the wire: the host's own connections break without a timeout, its
   * peers' time out. `healFrom` removes the cut.
   */
  cutFrom(name: string, from: 'broker' | 'control-plane' | 'peers'): void {
    const host = this.need(name);
    const route = (...args: string[]) => ip('-n', host.netns, 'route', 'add', ...args);
    if (from === 'broker') route('blackhole', `${this.brokerAddress}/32`);
    else if (from === 'control-plane') route('blackhole', `${this.gateway}/32`);
    else {
      // The two halves of the /24 beat its connected route; the gateway's and the broker's /32s beat them.
      route(`${this.gateway}/32`, 'dev', 'eth0');
      route(`${this.brokerAddress}/32`, 'dev', 'eth0');
      route('blackhole', `10.${this.subnet}.0.0/25`);
      route('blackhole', `10.${this.subnet}.0.128/25`);
    }
  }

  /** Removes every cut `cutFrom` made on host `name` (those it did not make are not there: nothing to do). */
  healFrom(name: string): void {
    const host = this.need(name);
    for (const prefix of [`${this.brokerAddress}/32`, `${this.gateway}/32`, `10.${this.subnet}.0.0/25`, `10.${this.subnet}.0.128/25`])
      for (const type of ['blackhole', 'unicast']) tryIp('-n', host.netns, 'route', 'del', type, prefix);
  }

  /** Removes every namespace and the bridge; processes still inside keep running, cut off. Idempotent. */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    for (const host of this.hosts.values()) {
      tryIp('link', 'del', host.link);
      tryIp('netns', 'del', host.netns);
      rmSync(`/etc/netns/${host.netns}`, { recursive: true, force: true });
    }
    tryIp('link', 'del', this.bridge);
  }

  private need(name: string): NetnsHost {
    const host = this.hosts.get(name);
    if (!host) throw new Error(`no host ${name}`);
    return host;
  }
}

function ip(...args: string[]): void {
  ipOut(...args);
}

function ipOut(...args: string[]): string {
  try {
    return execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    throw new Error(`ip ${args.join(' ')}: ${stderr || (err as Error).message}`);
  }
}

/** Namespaces (and their bridge) of runs whose process is gone: `robustrl-<pid>-<tag>-<n>`. */
function removeAbandoned(): void {
  const tags = new Set<string>();
  for (const line of ipOut('netns', 'list').split('\n')) {
    const m = /^robustrl-(\d+)-([0-9a-f]{6})-\d+/.exec(line.trim());
    if (!m || alive(Number(m[1]))) continue;
    const netns = line.trim().split(' ')[0];
    tryIp('netns', 'del', netns);
    rmSync(`/etc/netns/${netns}`, { recursive: true, force: true });
    tags.add(m[2]);
  }
  for (const tag of tags) tryIp('link', 'del', `rb${tag}`);
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function tryIp(...args: string[]): void {
  try {
    ip(...args);
  } catch {
    // already gone
  }
}

import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { NetnsHosts } from './netns-hosts';

/** Hosts as network namespaces: their own addresses, reachable from each other and from the bridge, cut and healed. Root only. */
const why = NetnsHosts.unavailable();
const maybe = why === null ? describe : describe.skip;

const get = (url: string, timeoutMs = 1_500) =>
  new Promise<number>((done) => {
    const req = request(url, { timeout: timeoutMs }, (res) => {
      res.resume();
      done(res.statusCode ?? 0);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => done(0));
    req.end();
  });

maybe(`network-namespace hosts${why ? ` (skipped: ${why})` : ''}`, () => {
  it('gives each host its own address, reachable across the bridge; a cut link times out, a healed one answers', async () => {
    const hosts = NetnsHosts.create();
    const server = (() => {
      const a = hosts.add('a');
      hosts.add('b');
      const { command, args } = hosts.wrap('a', process.execPath, ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(18071,'${a.address}')`]);
      return spawn(command, args, { stdio: 'ignore' });
    })();
    try {
      const a = hosts.get('a')!;
      expect(a.address).not.toBe(hosts.get('b')!.address);
      expect(existsSync(`/run/netns/${a.netns}`)).toBe(true);
      // From the root namespace (the bridge's side) and from host b.
      let code = 0;
      for (let i = 0; i < 40 && code !== 200; i++) {
        code = await get(`http://${a.address}:18071/`);
        if (code !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(code).toBe(200);
      const viaNode = hosts.wrap('b', process.execPath, [
        '-e',
        `require('http').get('http://${a.address}:18071/',r=>{console.log(r.statusCode);process.exit(0)}).on('error',()=>{console.log(0);process.exit(0)})`,
      ]);
      expect(viaNode.args.slice(0, 3)).toEqual(['netns', 'exec', hosts.get('b')!.netns]);
      const answer = await new Promise<string>((done) => {
        const child = spawn(viaNode.command, viaNode.args);
        let out = '';
        child.stdout.on('data', (c: Buffer) => (out += c.toString()));
        child.on('exit', () => done(out.trim()));
      });
      expect(answer).toBe('200');
      hosts.cut('a');
      expect(await get(`http://${a.address}:18071/`, 800)).toBe(0);
      hosts.heal('a');
      let healed = 0;
      for (let i = 0; i < 30 && healed !== 200; i++) {
        healed = await get(`http://${a.address}:18071/`);
        if (healed !== 200) await new Promise((r) => setTimeout(r, 100));
      }
      expect(healed).toBe(200);
    } finally {
      server.kill('SIGKILL');
      hosts.destroy();
    }
    expect(existsSync(`/run/netns/${hosts.get('a')!.netns}`)).toBe(false);
  });

  it('cuts a host from the broker only, from the control plane only, or from its peers only, and heals each', async () => {
    const hosts = NetnsHosts.create();
    const servers = [
      // "broker" and "control plane" in the root namespace on the bridge's two addresses; a peer on host b.
      spawn(process.execPath, ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(18072,'${hosts.brokerAddress}')`], { stdio: 'ignore' }),
      spawn(process.execPath, ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(18073,'${hosts.gateway}')`], { stdio: 'ignore' }),
    ];
    try {
      hosts.add('a');
      const b = hosts.add('b');
      const peer = hosts.wrap('b', process.execPath, ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(18074,'${b.address}')`]);
      servers.push(spawn(peer.command, peer.args, { stdio: 'ignore' }));
      /** What host a reaches now: broker, control plane, peer (1 answered, 0 not). */
      const reach = async () => {
        const probe = hosts.wrap('a', process.execPath, [
          '-e',
          `const h=require('http');const g=u=>new Promise(d=>{const r=h.get(u,{timeout:700},x=>{x.resume();d(1)});r.on('timeout',()=>r.destroy());r.on('error',()=>d(0))});` +
            `Promise.all(['http://${hosts.brokerAddress}:18072/','http://${hosts.gateway}:18073/','http://${b.address}:18074/'].map(g)).then(x=>console.log(x.join('')))`,
        ]);
        return new Promise<string>((done) => {
          const child = spawn(probe.command, probe.args);
          let out = '';
          child.stdout.on('data', (c: Buffer) => (out += c.toString()));
          child.on('exit', () => done(out.trim()));
        });
      };
      let all = '';
      for (let i = 0; i < 40 && all !== '111'; i++) all = await reach();
      expect(all).toBe('111');
      hosts.cutFrom('a', 'broker');
      expect(await reach()).toBe('011');
      hosts.healFrom('a');
      hosts.cutFrom('a', 'control-plane');
      expect(await reach()).toBe('101');
      hosts.healFrom('a');
      hosts.cutFrom('a', 'peers');
      expect(await reach()).toBe('110');
      hosts.healFrom('a');
      expect(await reach()).toBe('111');
    } finally {
      for (const server of servers) server.kill('SIGKILL');
      hosts.destroy();
    }
  });
});

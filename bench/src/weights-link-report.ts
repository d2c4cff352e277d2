/** The single-link benchmark's (weights-link.ts) markdown: one table row per transport, then notes. */
import { LinkResult, Measured, MIB, Ratio } from './weights-link-types';

export const fmtMiB = (x: number | null) => (x === null ? '—' : Math.round(x).toLocaleString('en-US'));

const fmtRatio = (r: Ratio | null) => (r === null ? '—' : `${r.median.toFixed(2)}x (${r.min.toFixed(2)}–${r.max.toFixed(2)})`);

/** Markdown: one table row per transport, then notes (failures with their reasons, lanes, CPU, commands). */
export function formatSingleLink(results: readonly LinkResult[]): string {
  if (results.length === 0) return 'no transports measured\n';
  const r0 = results[0];
  const size = r0.sizeBytes % MIB === 0 ? `${r0.sizeBytes / MIB} MiB` : `${r0.sizeBytes} B`;
  const cell = (m: Measured<object>) => (m.ok ? `${fmtMiB(m.medianMiBps)} / ${fmtMiB(m.bestMiBps)} / ${fmtMiB(m.meanMiBps)}` : 'failed¹');
  const lines = [
    `One GET (or copy) of ${size} at a time; ${r0.rounds} interleaved rounds of ${r0.warmup} warm-up + ${r0.iterations} timed per tool. ` +
      'MiB/s as median (of the round medians) / best / mean; ratios: median of the per-round ratios (min–max).',
    ...(Object.keys(r0.ucxEnv).length
      ? [
          `UCX settings from the environment, applied to both the module and ucx_perftest: ${Object.entries(r0.ucxEnv)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}.`,
        ]
      : []),
    '',
    '| transport | UCX_TLS | module | ucx_perftest | memcpy | module / ucx_perftest | module / memcpy |',
    '|---|---|---:|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.transport} | \`${r.tls}\` | ${cell(r.module)} | ${cell(r.perftest)} | ${cell(r.memcpy)} | ${fmtRatio(r.ratios.modulePerPerftest)} | ${fmtRatio(r.ratios.modulePerMemcpy)} |`,
    );
  }
  const notes: string[] = [];
  for (const r of results) {
    for (const [name, m] of [
      ['module', r.module],
      ['ucx_perftest', r.perftest],
      ['memcpy', r.memcpy],
    ] as const) {
      if (!m.ok) notes.push(`- ¹ ${r.transport} ${name}: ${m.reason}`);
    }
    if (r.module.ok) {
      const m = r.module;
      const pct = (x: number | null) => (x === null ? 'n/a' : `${Math.round(x * 100)} %`);
      notes.push(
        `- ${r.transport} module: ${m.path}; rma_bw lanes: ${m.rmaLanes || '(none)'}; ` +
          `worker wake-ups per GET: this process ${fmtMiB(m.wakeupsPerGet.client)}, peer ${fmtMiB(m.wakeupsPerGet.peer)}; ` +
          `CPU during the GETs: this process ${pct(m.cpu.client)}, peer ${pct(m.cpu.peer)}; ` +
          `bytes SHA-256-verified; round medians ${m.roundMedianMiBps.map(fmtMiB).join(', ')}`,
      );
    }
    if (r.perftest.ok) {
      notes.push(
        `- ${r.transport} ucx_perftest: \`${r.perftest.command}\` (its "MB/s" is ${r.perftest.unit}; median from its p50 latency, no best); ` +
          `round medians ${r.perftest.roundMedianMiBps.map(fmtMiB).join(', ')}`,
      );
    }
  }
  return `${lines.join('\n')}\n\n${notes.join('\n')}\n`;
}

import { SettingInfo } from './registry';

/** A Markdown table cell: no line breaks, no bare pipes. */
const cell = (s: string) => s.replace(/\s*\n\s*/g, ' ').replace(/\|/g, '\\|');

/**
 * The configuration reference (docs/operators/configuration-reference.md), one table per owner, from the
 * registry: generated (`npm run config:generate`), never edited by hand.
 */
export function renderReference(settings: readonly SettingInfo[]): string {
  const owners = [...new Set(settings.map((s) => s.owner))].sort();
  const out = [
    '# Configuration reference',
    '',
    '<!-- Generated from the code that reads each variable (libs/config; npm run config:generate). Do not edit. -->',
    '',
    '*For operators: every environment variable registered in the configuration registry, by who reads it. ' +
      'An empty value counts as unset. A value of the wrong form stops the process at start, naming the variable and the form. ' +
      'The [configuration overview](configuration.md) explains them by topic.*',
    '',
  ];
  for (const owner of owners) {
    out.push(`## ${owner}`, '', '| variable | meaning | accepted | default |', '|---|---|---|---|');
    for (const s of settings.filter((x) => x.owner === owner))
      out.push(`| \`${s.name}\` | ${cell(s.meaning)} | ${cell(s.accepted)} | ${cell(s.defaultText)} |`);
    out.push('');
  }
  return out.join('\n');
}

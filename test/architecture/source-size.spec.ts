import { join } from 'node:path';
import { MAX_SOURCE_LINES, oversized, readSources, sourceFiles } from './source-size';

const ROOT = join(__dirname, '..', '..');

describe('source files stay small', () => {
  it(`no source file outside tests and generated code has more than ${MAX_SOURCE_LINES} lines`, () => {
    const files = sourceFiles(ROOT);
    expect(files.length).toBeGreaterThan(300);
    expect(files).toContain('libs/service-kit/src/deciding-consumer.ts');
    expect(oversized(readSources(ROOT, files))).toEqual([]);
  });

  it('flags a file one line over the limit, not one at it (scratch files)', () => {
    const long = 'x\n'.repeat(MAX_SOURCE_LINES + 1);
    const exactly = 'x\n'.repeat(MAX_SOURCE_LINES);
    expect(
      oversized([
        { path: 'libs/a/src/long.ts', text: long },
        { path: 'libs/a/src/ok.ts', text: exactly },
      ]),
    ).toEqual([{ path: 'libs/a/src/long.ts', lines: MAX_SOURCE_LINES + 1 }]);
  });
});

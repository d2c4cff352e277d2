import { decodeNul, encodeNul } from './jsonb-nul';

describe('jsonb-nul: values PostgreSQL JSONB cannot hold round-trip exactly', () => {
  const cases: Array<[string, unknown]> = [
    ['a model message with NUL', { role: 'assistant', content: 'a\u0000b\u0000' }],
    ['a bare string of NULs', '\u0000\u0000'],
    ['nested arrays', [['x\u0000'], { deep: ['\u0000y'] }]],
    ['an object that looks like the encoding', { $nul: ['a', 'b'] }],
    ['an object that looks like the wrapped form', { $nul: { $nul: ['a'] } }],
    ['plain values', { role: 'user', content: 'hi', n: 3, ok: true, none: null }],
  ];
  it.each(cases)('%s', (_, value) => {
    const stored = JSON.parse(JSON.stringify(encodeNul(value))) as unknown;
    expect(JSON.stringify(stored)).not.toContain('\\u0000');
    expect(decodeNul(stored)).toEqual(value);
  });

  it('leaves values without NUL as they are (rows stored before the encoding read back unchanged)', () => {
    const value = { role: 'assistant', content: 'hello', tool_calls: [{ id: 'c1' }] };
    expect(encodeNul(value)).toEqual(value);
    expect(decodeNul(value)).toEqual(value);
  });
});

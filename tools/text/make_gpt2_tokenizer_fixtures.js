#!/usr/bin/env node
// Writes tests/unit/data/gpt2_tokenizer/reference.txt: texts and the ids the npm package
// gpt-3-encoder 1.1.4 (OpenAI's encoder.py ported to JavaScript) gives for them, so that
// tests/unit/gpt2_tokenizer_test.cpp checks shaped's tokenizer against the reference offline.
//
//   npm install --prefix /tmp/gpt3enc gpt-3-encoder@1.1.4
//   NODE_PATH=/tmp/gpt3enc/node_modules node tools/text/make_gpt2_tokenizer_fixtures.js
//
// The package ships its own copy of GPT-2's files, encoder.json and vocab.bpe. The script
// refuses to run unless both are byte-identical (SHA-256) to ../shared/tokenizers/gpt2/'s, which
// the tests load; for gpt-3-encoder 1.1.4 they are:
//   encoder.json 196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
//   vocab.bpe    1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
//
// The fixture's format, one case a block, for a reader that needs no JSON:
//   case <name>
//   # <the text as a JSON string, for people to read>
//   text <the text's UTF-8 bytes in hex, empty for the empty text>
//   ids <the reference's ids, separated by spaces>

'use strict';

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const {encode} = require('gpt-3-encoder');

const repo = path.resolve(__dirname, '..', '..');
const sharedDir = path.resolve(repo, '..', 'shared', 'tokenizers', 'gpt2');
const packageDir = path.dirname(require.resolve('gpt-3-encoder/package.json'));
const output = path.join(repo, 'tests', 'unit', 'data', 'gpt2_tokenizer', 'reference.txt');

const sha256 = file => crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
for (const name of ['encoder.json', 'vocab.bpe']) {
  const ours = sha256(path.join(sharedDir, name));
  const theirs = sha256(path.join(packageDir, name));
  if (ours !== theirs) throw new Error(`${name}: the package's (${theirs}) differs from ${sharedDir}'s (${ours})`);
}

const paragraph =
    'The tokenizer splits text into words first, with a pattern that keeps contractions ' +
    "(don't, we'll, they're) apart, and then merges each word's bytes by rank. In 2019, OpenAI " +
    'released GPT-2 with a vocabulary of 50,257 tokens: 256 bytes, 50,000 merges and one special ' +
    'token.\n\nIt handles "quotes", (parentheses), e-mail@example.com, URLs like ' +
    'https://example.org/path?q=1&r=2, and prices such as $3.50 or €12,99 — without any ' +
    'unknown token.  Double spaces, tabs\tand trailing spaces   \nall survive a round trip.\n';

const cases = [
  ['empty', ''],
  ['one word', 'Hello'],
  ['two words', 'Hello world'],
  ['sentence', 'The quick brown fox jumps over the lazy dog.'],
  ['leading space', ' leading space'],
  ['trailing spaces', 'trailing spaces   '],
  ['only spaces', '     '],
  ['one space', ' '],
  ['spaces before a word', 'a    b'],
  ['space newline space', '  \n  '],
  ['newlines', 'line one\nline two\n\n\nline five\n'],
  ['crlf', 'windows\r\nline\r\n'],
  ['tabs', '\tindented\t\tcode\t'],
  ['mixed white space runs', 'a \t\n b\u000b\u000cc\r \n'],
  ['unicode spaces', 'no\u00a0break\u2003em\u3000ideographic\u2028line\u202fnarrow\ufeffbom'],
  ['white space at the end', 'end \n'],
  ['contractions', "'s 't 're 've 'm 'll 'd"],
  ['contractions in words', "it's can't you're we've I'm they'll he'd"],
  ['contractions uppercase', "IT'S CAN'T YOU'RE WE'VE I'M THEY'LL HE'D 'S 'T 'RE 'VE 'M 'LL 'D"],
  ['contractions mixed case', "'Re 'rE 'Ve 'Ll 'lL"],
  ['apostrophes', "''' '''s rock'n'roll 'tis o' ' '"],
  ['curly apostrophe', 'don\u2019t it\u2019s'],
  ['digits', '0 1 12 123 1234 12345 123456789012345678901234567890'],
  ['number with separators', '1,000.5 -3.14e10 0x1F 1_000_000 50%'],
  ['dates and times', '2019-02-14 12:30:45'],
  ['unicode digits', '\u0661\u0662\u0663 \u0967\u0968 \u2460\u2461 \u00bd \u2167 \uff11\uff12'],
  ['punctuation runs', '!!! ??? ... --- *** ### ,,, ;;; ::: ()[]{} <>/\\|~`^'],
  ['punctuation and words', 'Wait... what?! (Really?) Yes -- no; maybe: "ok".'],
  ['code', 'for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n'],
  ['accents', 'caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00dcber Stra\u00dfe se\u00f1or'],
  ['combining marks', 'e\u0301 a\u0308 n\u0303 \u0915\u094d\u0937 Z\u0351\u036b\u0343'],
  ['greek and cyrillic', '\u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u043e\u0441\u043a\u0432\u0430'],
  ['cjk', '\u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u4e2d\u6587\u3001\ud55c\uad6d\uc5b4'],
  ['arabic and hebrew', '\u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd'],
  ['emoji', '\ud83e\udd17 \ud83d\ude00\ud83d\ude00 \ud83e\udd99 \u2764\ufe0f'],
  ['emoji sequences', '\ud83d\udc69\u200d\ud83d\udc69\u200d\ud83d\udc67 \ud83d\udc4d\ud83c\udffd \ud83c\uddeb\ud83c\uddf7'],
  ['letters and digits', 'abc123def 4ever GPT2 x86_64'],
  ['control characters', 'a\u0000b\u0001c\u007fd\u0085e'],
  ['special token text', '<|endoftext|>'],
  ['repeated letters', 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa'],
  ['long word', 'Pneumonoultramicroscopicsilicovolcanoconiosis antidisestablishmentarianism'],
  ['paragraph', paragraph],
];

// Seeded random texts: code points drawn from pools of every class the pattern tells apart,
// so that runs of each meet runs of every other.
const pools = [
  ' ', ' ', ' ', '  ', '\n', '\t', '\r\n', '\u00a0', '\u3000', "'", "'s", "'ll", "'S", "'re",
  'a', 'Z', 'hello', 'The', '\u00e9', '\u00df', '\u03bb', '\u0436', '\u65e5', '\u672c', '\uac00',
  '\u0301', '\u0308', '0', '7', '42', '\u0663', '\u00bd', '\u2167', '.', ',', '!', '?', '-', '(',
  ')', '"', '#', '$', '\u2014', '\u20ac', '\ud83d\ude00', '\ud83e\udd17', '\u200d', '\ufe0f',
];
let state = 20190214;
const random = () => {
  state = (state * 1103515245 + 12345) % 2147483648;
  return state / 2147483648;
};
for (let i = 0; i < 40; ++i) {
  let text = '';
  const length = 1 + Math.floor(random() * 30);
  for (let j = 0; j < length; ++j) text += pools[Math.floor(random() * pools.length)];
  cases.push([`random ${i}`, text]);
}

const blocks = cases.map(([name, text]) => [
  `case ${name}`,
  `# ${JSON.stringify(text)}`,
  `text ${Buffer.from(text, 'utf8').toString('hex')}`.trimEnd(),
  `ids ${encode(text).join(' ')}`.trimEnd(),
].join('\n'));
const header = [
  '# Generated by tools/text/make_gpt2_tokenizer_fixtures.js from the npm package gpt-3-encoder',
  '# 1.1.4 (node ' + process.version + '); do not edit. Each case: its name, the text as JSON, the',
  "# text's UTF-8 bytes in hex, and the reference's ids.",
];
fs.writeFileSync(output, header.join('\n') + '\n\n' + blocks.join('\n\n') + '\n');
console.log(`wrote ${cases.length} cases to ${output}`);

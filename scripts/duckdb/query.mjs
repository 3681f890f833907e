// Runs SQL in embedded DuckDB and prints each result as a table: the
// README's fleet and export queries where no duckdb CLI is installed
// (`npm ci` here first; `make deps-duckdb` does it).
//
//   node scripts/duckdb/query.mjs [-C DIR] SQLFILE|-   (- : standard input)
//
// Statements are split at a ';' that ends a line (so a string literal
// must not hold one at a line's end); DIR is the working
// directory the queries' paths are relative to (default: the current one).
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const args = process.argv.slice(2);
let dir = '.';
if (args[0] === '-C') {
  if (args.length < 2) {
    console.error('usage: node query.mjs [-C DIR] SQLFILE|-');
    process.exit(2);
  }
  dir = args[1];
  args.splice(0, 2);
}
if (args.length !== 1) {
  console.error('usage: node query.mjs [-C DIR] SQLFILE|-');
  process.exit(2);
}
let sql;
try {
  sql = readFileSync(args[0] === '-' ? 0 : args[0], 'utf8');
  process.chdir(dir);
} catch (e) {
  console.error(`query.mjs: ${e.message}`);
  process.exit(1);
}
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const statements = sql.split(/;\s*\n/).map((s) => s.trim()).filter((s) => s.replace(/--.*$/gm, '').trim());
for (const q of statements) {
  let reader;
  try {
    reader = await c.runAndReadAll(q);
  } catch (e) {
    console.error(`query.mjs: ${e.message.split('\n')[0]}\n  in: ${q.split('\n').find((l) => !l.startsWith('--'))}`);
    process.exit(1);
  }
  const names = reader.columnNames();
  if (names.length === 0 || /^\s*(--.*\n\s*)*create/i.test(q)) continue;
  const rows = reader.getRowsJson().map((r) => r.map((v) => (v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : String(v))));
  const title = q.split('\n').filter((l) => l.startsWith('--')).map((l) => l.slice(2).trim()).join(' ');
  if (title) console.log(`-- ${title}`);
  const width = names.map((n, i) => Math.max(n.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((s, i) => s.padEnd(width[i])).join('  ').trimEnd();
  console.log(line(names));
  console.log(line(width.map((w) => '-'.repeat(w))));
  for (const r of rows) console.log(line(r));
  console.log(`(${rows.length} row${rows.length === 1 ? '' : 's'})\n`);
}

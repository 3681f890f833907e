// DuckDB reads a directory of fleet summary files (`idletrace stats` and
// `idletrace whatif` with --format parquet and jsonl) through globs, as a
// fleet's analyst would, and adds them up, so that a reader outside
// idletrace checks them (pkg/fleet TestFleetDuckDB compares its answer with
// what pkg/analysis computed of each trace). It expects that test's
// synthetic fleet (its oracle policy, a C1 state); for your own queries
// use query.mjs beside it.
//
//   node scripts/duckdb/fleet.mjs DIR [SQLFILE]
//
// DIR holds fleet/stats/*.parquet, fleet/whatif/*.parquet,
// jsonl/stats/*.jsonl and jsonl/whatif/*.jsonl; the queries run with DIR as
// the working directory. SQLFILE holds more statements (the README's), run
// one after the other, each reporting its row count. Prints one JSON
// object; every integer is a string (DuckDB's BIGINT).
import { readFileSync } from 'node:fs';
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, sqlFile] = process.argv.slice(2);
if (!dir) {
  console.error('usage: node fleet.mjs DIR [SQLFILE]');
  process.exit(2);
}
const extra = sqlFile ? readFileSync(sqlFile, 'utf8') : '';
process.chdir(dir);

const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const rows = async (sql) => (await c.runAndReadAll(sql)).getRowObjectsJson();

// JSON lines carry no schema: DuckDB infers one, here from every line of
// every file, and unions the files' columns by name.
const jsonl = (glob) => `read_json('${glob}', format = 'newline_delimited', union_by_name = true, sample_size = -1, maximum_sample_files = -1)`;
const sources = {
  parquet: { stats: `read_parquet('fleet/stats/*.parquet')`, whatif: `read_parquet('fleet/whatif/*.parquet')` },
  jsonl: { stats: jsonl('jsonl/stats/*.jsonl'), whatif: jsonl('jsonl/whatif/*.jsonl') },
};

const out = {};
for (const [format, src] of Object.entries(sources)) {
  out[format] = {
    stats: (await rows(`
      select count(*) filter (where kind = 'state') as state_rows, count(*) filter (where kind = 'trace') as trace_rows,
             count(distinct host) as hosts, count(distinct trace) as traces,
             sum(usage) as usage, sum(time_ns) as time_ns, sum(kernel_usage) as kernel_usage,
             count(kernel_usage) as kernel_rows, sum(wake_latency_ns_count) as wake_count,
             sum(io_requests) as io_requests, count(io_requests) as io_traces, sum(task_io_waited) as task_io_waited,
             sum(idle_periods) as idle_periods, sum(idle_period_ns_count) as state_periods,
             sum(tick_stopped) as tick_stopped, sum(tick_stopped_known) as tick_stopped_known,
             sum(tick_stopped_before) as tick_stopped_before, sum(tick_stopped_before_known) as tick_stopped_before_known,
             sum(kernel_tick_stops) as kernel_tick_stops
      from ${src.stats}`))[0],
    // One value per host: its idle time, worst wake-up, IO requests.
    hosts: await rows(`
      select host, sum(time_ns) as time_ns, max(wake_latency_ns_max) as wake_max_ns, sum(io_requests) as io_requests
      from ${src.stats} group by host order by host`),
    whatif: (await rows(`
      select count(*) as rows, count(distinct host) as hosts, sum(idle_periods) as idle_periods, sum(above) as above
      from ${src.whatif}`))[0],
    // oracle's share of C1, NULL where the profile has none.
    shares: await rows(`
      select host, state_share['C1']::double as c1 from ${src.whatif} where policy = 'oracle' order by host`),
  };
}
out.queries = [];
for (const q of extra.split(/;\s*\n/).map((s) => s.trim()).filter((s) => s.replace(/--.*$/gm, '').trim())) {
  const sql = q.split('\n').find((l) => !l.startsWith('--'));
  out.queries.push({ sql, rows: (await rows(q)).length, creates: /^create/i.test(sql) });
}
console.log(JSON.stringify(out));

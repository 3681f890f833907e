// DuckDB reads the tables `idletrace export` wrote and counts what stats
// counts, so that a reader outside idletrace checks them
// (cmd/idletrace TestExportDuckDB compares its answer with stats).
//
//   node scripts/duckdb/check.mjs DIR csv|parquet
//
// Prints one JSON object; every number is a string (DuckDB's BIGINT).
import { DuckDBInstance } from '@duckdb/node-api';

const [dir, format] = process.argv.slice(2);
if (!dir || !['csv', 'parquet'].includes(format)) {
  console.error('usage: node check.mjs DIR csv|parquet');
  process.exit(2);
}
const table = (name) => {
  const path = `${dir}/${name}.${format}`.replaceAll("'", "''");
  // sample_size=-1: the types come from the whole file, not its first rows.
  return format === 'csv' ? `read_csv('${path}', header = true, sample_size = -1)` : `read_parquet('${path}')`;
};
const idle = table('idle_periods');
const io = table('io_requests');
const qos = table('pm_qos_changes');

const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
const rows = async (sql) => (await c.runAndReadAll(sql)).getRowObjectsJson();

const out = {
  idle_rows: (await rows(`select count(*) as n from ${idle}`))[0].n,
  io_rows: (await rows(`select count(*) as n from ${io}`))[0].n,
  // stats' cpus[].states[]: over the periods in its window that the kernel counts.
  states: await rows(`
    select cpu::bigint as cpu, state_name as name, count(*) as usage, sum(residency_ns) as time_ns,
           count(*) filter (where above) as above, count(*) filter (where below) as below
    from ${idle} where in_stats_window and counted
    group by cpu, state_name order by cpu, state_name`),
  // stats' wake_latency_ns: per state name.
  wake_latency: await rows(`
    select state_name as name, count(wake_latency_ns) as count, max(wake_latency_ns) as max
    from ${idle} where in_stats_window and wake_latency_ns is not null
    group by state_name order by state_name`),
  // stats' io.requests and io.woke_idle_cpu.
  io: (await rows(`
    select count(*) as requests, count(*) filter (where woke_idle) as woke_idle_cpu
    from ${io} where in_stats_window`))[0],
  // info's PM QoS changes, and each limit where the trace ends (-1: none).
  pm_qos: {
    changes: (await rows(`select count(*) as n from ${qos} where action <> 'in_force'`))[0].n,
    last: await rows(`
      select kind, coalesce(cpu::bigint, -1) as cpu, arg_max(coalesce(limit_us::bigint, -1), time_ns) as limit_us
      from ${qos} group by all order by all`),
  },
};
console.log(JSON.stringify(out));

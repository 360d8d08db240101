/** Where a run's CPU goes, for the bench only: per-thread CPU, GC time and request window, written when it exits. */
import { subscribe } from 'node:diagnostics_channel';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { type PerformanceEntry, PerformanceObserver } from 'node:perf_hooks';
import { isMainThread, threadId } from 'node:worker_threads';

/**
 * The variable naming the JSON file to write. Unset (every normal run), nothing here runs: no observer, no
 * subscription, no file.
 */
export const BENCH_REPORT_VARIABLE = 'UID2_BATCH_BENCH_REPORT';

const REPORT_FILE = process.env[BENCH_REPORT_VARIABLE] || undefined;

/** The clock tick of /proc/<pid>/task/<tid>/stat on Linux (USER_HZ), in microseconds. */
const TICK_US = 10_000;

interface ThreadFigures {
  thread: number;
  cpu_us: number;
  gc_ms: number;
  gc_count: number;
}

/**
 * This thread's CPU time (user + system), in microseconds: process.threadCpuUsage where node has it, else
 * /proc/thread-self/stat (Linux, 10 ms ticks); NaN elsewhere. process.cpuUsage would count every thread.
 */
function threadCpuUs(): { us: number; source: string } {
  const own = (process as { threadCpuUsage?: () => NodeJS.CpuUsage }).threadCpuUsage;
  if (typeof own === 'function') {
    const u = own.call(process);
    return { us: u.user + u.system, source: 'process.threadCpuUsage' };
  }
  try {
    const fields = readFileSync('/proc/thread-self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
    return { us: (Number(fields[11]) + Number(fields[12])) * TICK_US, source: '/proc/thread-self/stat' };
  } catch {
    return { us: Number.NaN, source: 'none' };
  }
}

/** The GC pauses this thread has seen (perf_hooks 'gc' entries: their durations, on this thread's clock). */
function watchGc(): () => { ms: number; count: number } {
  let ms = 0;
  let count = 0;
  const add = (entries: PerformanceEntry[]) => {
    for (const e of entries) {
      ms += e.duration;
      count++;
    }
  };
  const observer = new PerformanceObserver((list) => add(list.getEntries()));
  observer.observe({ entryTypes: ['gc'] });
  return () => {
    add(observer.takeRecords());
    return { ms, count };
  };
}

// a worker thread watches from its start, so that its first task's collections count too
const gcOfWorker = REPORT_FILE !== undefined && !isMainThread ? watchGc() : undefined;

/**
 * In a worker thread: writes its figures so far next to the report (the main thread collects them). Called after
 * each task, since a terminated thread runs no exit handler.
 */
export function noteTaskDone(): void {
  if (REPORT_FILE === undefined || gcOfWorker === undefined) return;
  const gc = gcOfWorker();
  const figures: ThreadFigures = { thread: threadId, cpu_us: threadCpuUs().us, gc_ms: gc.ms, gc_count: gc.count };
  writeFileSync(`${REPORT_FILE}.thread-${threadId}`, JSON.stringify(figures));
}

// a thread that is never given a task is counted too (its start-up)
noteTaskDone();

/**
 * Requests in flight over time, from undici's diagnostics channels: the time-weighted mean between the creation
 * of the `from`-th request (the window has had its chance to fill) and the creation of the last one (after it
 * only the last wave drains).
 */
export class WindowOccupancy {
  private inFlight = 0;
  private created = 0;
  private maxInFlight = 0;
  private lastT = 0;
  private area = 0;
  private fromT = Number.NaN;
  private fromArea = 0;
  private lastCreateT = Number.NaN;
  private lastCreateArea = 0;
  private readonly open = new WeakSet<object>();

  constructor(private readonly from = 20) {}

  private advance(t: number): void {
    if (this.created > 0) this.area += this.inFlight * (t - this.lastT);
    this.lastT = t;
  }

  create(request: object, t: number): void {
    this.advance(t);
    this.open.add(request);
    this.inFlight++;
    this.created++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    if (this.created === this.from) {
      this.fromT = t;
      this.fromArea = this.area;
    }
    this.lastCreateT = t;
    this.lastCreateArea = this.area;
  }

  /** A request's end (its trailers or its error); a second end of the same request is not counted. */
  end(request: object, t: number): void {
    if (!this.open.has(request)) return;
    this.advance(t);
    this.open.delete(request);
    this.inFlight--;
  }

  figures(): { requests: number; max_in_flight: number; mean_in_flight: number; window_ms: number } {
    const span = this.lastCreateT - this.fromT;
    return {
      requests: this.created,
      max_in_flight: this.maxInFlight,
      mean_in_flight: span > 0 ? (this.lastCreateArea - this.fromArea) / span : Number.NaN,
      window_ms: Math.max(span, 0) || 0,
    };
  }
}

/** In the main thread: starts watching, and writes the report as the process exits. No-op unless asked for. */
export function startBenchReport(): void {
  if (REPORT_FILE === undefined || !isMainThread) return;
  const file = REPORT_FILE;
  const gc = watchGc();
  const window = new WindowOccupancy();
  const now = () => performance.now();
  subscribe('undici:request:create', (m) => window.create((m as { request: object }).request, now()));
  subscribe('undici:request:trailers', (m) => window.end((m as { request: object }).request, now()));
  subscribe('undici:request:error', (m) => window.end((m as { request: object }).request, now()));
  process.on('exit', () => {
    const main = threadCpuUs();
    const mainGc = gc();
    const usage = process.resourceUsage();
    const dir = dirname(file);
    const prefix = `${basename(file)}.thread-`;
    const threads: ThreadFigures[] = [];
    for (const name of readdirSync(dir)) {
      if (!name.startsWith(prefix)) continue;
      const path = join(dir, name);
      try {
        threads.push(JSON.parse(readFileSync(path, 'utf8')) as ThreadFigures);
      } catch {
        // a thread stopped while writing: its figures are lost, the others stand
      }
      rmSync(path, { force: true });
    }
    threads.sort((a, b) => a.thread - b.thread);
    writeFileSync(
      file,
      `${JSON.stringify({
        cpu_source: main.source,
        process_cpu_us: usage.userCPUTime + usage.systemCPUTime,
        main: { thread: 0, cpu_us: main.us, gc_ms: mainGc.ms, gc_count: mainGc.count },
        threads,
        window: window.figures(),
      })}\n`,
    );
  });
}

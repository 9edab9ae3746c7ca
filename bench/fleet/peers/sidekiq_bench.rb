# Sidekiq (Debian's ruby-sidekiq 6.4, redis-rb with the hiredis driver) in
# the three shapes of bench/fleet/vs_peers.sh; prints one JSON line.
#
#   ruby sidekiq_bench.rb drain REDIS_URL JOBS CONCURRENCY
#     Enqueues JOBS empty jobs with Sidekiq::Client.push_bulk, 1,000 a call
#     (the most its authors advise a call to carry: the comment on push_bulk),
#     then starts one `sidekiq -c CONCURRENCY` process and times, inside it,
#     from its :startup event to the JOBS-th job's end. Redis commands a job:
#     INFO commandstats after the drain, CONFIG RESETSTAT before the enqueue
#     (every command of both phases, the worker's start-up and heartbeats too).
#   ruby sidekiq_bench.rb overload REDIS_URL RATE SECONDS CONCURRENCY
#     Starts one `sidekiq -c CONCURRENCY` process, then offers RATE jobs/s on a
#     fixed schedule for SECONDS (a producer behind schedule sends at once),
#     one perform_async each, carrying its send time (CLOCK_MONOTONIC). A job
#     sleeps 10 ms; it is in time if it started within 500 ms of its send.
#     Sidekiq has no freshness bound, so every job runs, however late. Counts
#     are read FRESHNESS + 2 service times after the offering, as hourglass-bench
#     does, then the worker is stopped.
#   ruby sidekiq_bench.rb latency REDIS_URL RATE SECONDS CONCURRENCY
#     Enqueue-to-start latency. Starts one `sidekiq -c CONCURRENCY` process,
#     then offers RATE empty jobs/s on a fixed schedule for SECONDS (a producer
#     behind schedule sends at once), one perform_async each, carrying its send
#     time (CLOCK_MONOTONIC). The job's first act is to note its start time
#     less that send time, in the worker's memory; once all the jobs offered
#     have run, the worker writes them out and the harness prints their p50
#     and p99 (nearest rank below, as hourglass-bench). vs_peers.sh offers half
#     the drain rate it just measured: at capacity a queue's wait is its
#     backlog, which grows for as long as the offering lasts; at half of it the
#     wait is what the system adds on its own (fetch, dispatch, start) plus the
#     modest queueing any busy server has, and systems of different capacity
#     are compared at the same load.
#
# Default settings otherwise (retries on, queue "default", BRPOP fetch, 5 s
# heartbeat): what a Sidekiq user gets. The worker counts drained jobs in its
# own memory, so the drain costs Redis nothing but Sidekiq's own commands;
# so do the latency jobs, their waits; under overload each job adds one
# HINCRBY, its tally.
require "json"
require "sidekiq"
require "tmpdir"

Redis.silence_deprecations = true  # redis-rb 4.8 on Sidekiq 6.4's SADD

FRESHNESS = 0.5
SERVICE = 0.010
TALLY = "peerbench:overload"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def redis_options(url) = { url: url, driver: :hiredis }

if ENV["BENCH_REDIS"]  # inside the sidekiq process
  Sidekiq.configure_server do |config|
    config.redis = redis_options(ENV.fetch("BENCH_REDIS"))
    config.on(:startup) { Tally.ready }
  end
end

# The worker process's own record: when it started and when the drain ended;
# each latency job's wait.
module Tally
  @mutex = Mutex.new
  @done = 0
  @t0 = nil
  @waits = []

  def self.write(path, body)
    File.write("#{path}.tmp", body)
    File.rename("#{path}.tmp", path)
  end

  def self.ready
    @mutex.synchronize { @t0 ||= now }
    write("#{ENV.fetch('BENCH_OUT')}.ready", "")
  end

  def self.one_done
    @mutex.synchronize do
      @done += 1
      next unless @done == Integer(ENV.fetch("BENCH_JOBS"))

      write(ENV.fetch("BENCH_OUT"), JSON.generate({ "seconds" => now - @t0 }))
    end
  end

  def self.waited(seconds)
    @mutex.synchronize do
      @waits << seconds
      next unless @waits.size == Integer(ENV.fetch("BENCH_JOBS"))

      write(ENV.fetch("BENCH_OUT"), JSON.generate({ "waits" => @waits }))
    end
  end
end

class EmptyJob
  include Sidekiq::Worker

  def perform = Tally.one_done
end

class StampedJob
  include Sidekiq::Worker

  def perform(sent) = Tally.waited(now - sent)
end

class SleepJob
  include Sidekiq::Worker

  def perform(sent)
    late = now - sent > FRESHNESS
    sleep SERVICE
    Sidekiq.redis { |r| r.hincrby(TALLY, late ? "late" : "in_time", 1) }
  end
end

# ---- the harness (run as a script) ----

def start_worker(url, concurrency, out, jobs: 0)
  env = { "BENCH_REDIS" => url, "BENCH_OUT" => out, "BENCH_JOBS" => jobs.to_s }
  pid = spawn(env, "sidekiq", "-c", concurrency.to_s, "-r", File.expand_path(__FILE__),
              %i[out err] => ["#{out}.log", "w"])
  at_exit { stop_worker(pid) }  # a harness that failed leaves none
  pid
end

def wait_for(path, pid, limit)
  deadline = now + limit
  until File.exist?(path)
    if Process.wait(pid, Process::WNOHANG)
      abort "sidekiq exited early:\n#{File.read("#{path.delete_suffix('.ready')}.log")}"
    end
    abort "sidekiq: no #{path} after #{limit} s" if now > deadline
    sleep 0.001
  end
end

def stop_worker(pid)
  Process.kill("TERM", pid)
  deadline = now + 30
  until Process.wait(pid, Process::WNOHANG)
    Process.kill("KILL", pid) if now > deadline
    sleep 0.01
  end
rescue Errno::ESRCH, Errno::ECHILD
  nil
end

def redis_calls(redis)
  redis.info("commandstats").values.sum { |v| Integer(v["calls"]) }
end

def drain(url, jobs, concurrency, dir)
  redis = Redis.new(**redis_options(url))
  redis.config(:resetstat)
  t0 = now
  (0...jobs).each_slice(1000) do |slice|
    Sidekiq::Client.push_bulk("class" => EmptyJob, "args" => Array.new(slice.size) { [] })
  end
  enqueue = jobs / (now - t0)
  out = File.join(dir, "drain")
  pid = start_worker(url, concurrency, out, jobs: jobs)
  wait_for(out, pid, [120, jobs / 50].max)
  calls = redis_calls(redis) - 1  # less CONFIG RESETSTAT
  stop_worker(pid)
  seconds = JSON.parse(File.read(out))["seconds"]
  { "system" => "sidekiq", "shape" => "drain", "jobs" => jobs, "enqueue_jobs_per_s" => enqueue,
    "drain_jobs_per_s" => jobs / seconds, "redis_calls_per_job" => calls.to_f / jobs }
end

def overload(url, rate, length, concurrency, dir)
  redis = Redis.new(**redis_options(url))
  redis.del(TALLY)
  out = File.join(dir, "overload")
  pid = start_worker(url, concurrency, out)
  wait_for("#{out}.ready", pid, 60)
  total = (rate * length).to_i
  t0 = now
  total.times do |i|
    ahead = t0 + (i / rate) - now
    sleep ahead if ahead.positive?
    SleepJob.perform_async(now)
  end
  offered_for = [now - t0, length].max
  sleep FRESHNESS + (2 * SERVICE)
  tally = redis.hgetall(TALLY).transform_values(&:to_i)
  stop_worker(pid)
  in_time = tally.fetch("in_time", 0)
  late = tally.fetch("late", 0)
  { "system" => "sidekiq", "shape" => "overload", "offered" => total, "offered_per_s" => total / offered_for,
    "refused" => 0, "ran" => in_time + late, "ran_in_time" => in_time, "ran_too_late" => late,
    "goodput_per_s" => in_time / offered_for, "capacity_per_s" => concurrency / SERVICE }
end

# Nearest rank below, as hourglass-bench: the (q * (n - 1))-th of the sorted waits.
def percentile_ms(sorted, q) = sorted[(q * (sorted.size - 1)).floor] * 1000

def latency(url, rate, length, concurrency, dir)
  total = (rate * length).to_i
  out = File.join(dir, "latency")
  pid = start_worker(url, concurrency, out, jobs: total)
  wait_for("#{out}.ready", pid, 60)
  t0 = now
  total.times do |i|
    ahead = t0 + (i / rate) - now
    sleep ahead if ahead.positive?
    StampedJob.perform_async(now)
  end
  offered_for = [now - t0, length].max
  wait_for(out, pid, 60)
  stop_worker(pid)
  waits = JSON.parse(File.read(out))["waits"].sort
  { "system" => "sidekiq", "shape" => "latency", "rate" => rate, "offered" => total,
    "offered_per_s" => total / offered_for, "ran" => waits.size,
    "latency_p50_ms" => percentile_ms(waits, 0.5), "latency_p99_ms" => percentile_ms(waits, 0.99) }
end

if $PROGRAM_NAME == __FILE__
  mode, url, *rest = ARGV
  Sidekiq.configure_client { |config| config.redis = redis_options(url).merge(size: 2) }
  Sidekiq.logger.level = Logger::WARN
  result = Dir.mktmpdir("sidekiq-bench") do |dir|
    case mode
    when "drain" then drain(url, Integer(rest[0]), Integer(rest[1]), dir)
    when "overload" then overload(url, Float(rest[0]), Float(rest[1]), Integer(rest[2]), dir)
    when "latency" then latency(url, Float(rest[0]), Float(rest[1]), Integer(rest[2]), dir)
    else abort "usage: #{$PROGRAM_NAME} drain URL JOBS CONCURRENCY | overload URL RATE SECONDS CONCURRENCY " \
               "| latency URL RATE SECONDS CONCURRENCY"
    end
  end
  puts JSON.generate(result)
end

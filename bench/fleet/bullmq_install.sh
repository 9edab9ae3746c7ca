# Sourced by the scripts that run BullMQ (vs_peers.sh, retry_vs_bullmq.sh):
# bullmq@6 with its peer dependency ioredis@5, from npm into build/peers/bullmq
# once, and BULLMQ_DIR exported for bench/fleet/peers/*.mjs.
bullmq_dir=$PWD/build/peers/bullmq
bullmq_major() { node -p "require('$bullmq_dir/node_modules/bullmq/package.json').version.split('.')[0]" 2>/dev/null; }
if [ "$(bullmq_major)" != 6 ] || [ ! -f "$bullmq_dir/node_modules/ioredis/package.json" ]; then
  mkdir -p "$bullmq_dir"
  [ -f "$bullmq_dir/package.json" ] || echo '{"private": true}' >"$bullmq_dir/package.json"
  # BullMQ 6 no longer brings its Redis client: ioredis is a peer dependency.
  (cd "$bullmq_dir" && npm install --no-audit --no-fund --loglevel=error bullmq@6 ioredis@5)
fi
export BULLMQ_DIR=$bullmq_dir

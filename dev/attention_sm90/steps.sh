# Sourced by the device scripts (run_s7h.sh .. run_s9.sh): every step runs under a timeout and is
# skipped once $DEADLINE seconds of the script have passed, so that a device call always returns
# its logs (/tmp/x/NAME.txt, tarred into $OUT/logs.tgz after every step). A step with less than
# $STEP_MIN seconds (default 10) is skipped.
left() { echo $((DEADLINE - SECONDS)); }
step() { # step NAME MAX_SECONDS CMD...: runs CMD under min(MAX, time left), logs to /tmp/x/NAME.txt
  local name=$1 max=$2 t
  shift 2
  t=$(left)
  [ $t -gt $max ] && t=$max
  if [ $t -lt ${STEP_MIN:-10} ]; then echo "skipped (deadline)" > /tmp/x/$name.txt; return; fi
  timeout $t "$@" > /tmp/x/$name.txt 2>&1
  echo "$name rc=$? (${t}s limit, at ${SECONDS}s)" >> /tmp/x/$name.txt
  tar czf $OUT/logs.tgz -C /tmp/x . 2>/dev/null
}

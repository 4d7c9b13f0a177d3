# Sourced by call1.sh, call1s.sh, call1t.sh (after call_prologue.sh, B set): boundary PASSES ROWS:
# ef / ia / efia against the tree on ROWS where efia's grid passed ($out/test_prefill_efia.log),
# else ef alone (ia's hand-over is new synchronization).
boundary() {
  local c=(ef=@$B/ef/libflashserve_c.so)
  if grep -q "^\[  PASSED" "$out/test_prefill_efia.log" 2>/dev/null; then
    c+=(ia=@$B/ia/libflashserve_c.so efia=@$B/efia/libflashserve_c.so)
  fi
  ab boundary "$1" "$2" "${c[@]}"
}

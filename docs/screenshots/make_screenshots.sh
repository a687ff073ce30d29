#!/usr/bin/env bash
# Regenerate docs/screenshots/*.png: PulseView 0.4.2 (Debian bookworm) under
# Xvfb, showing the annotations of each spigap decoder on a bundled capture.
#
#   docs/screenshots/make_screenshots.sh            # all of them
#   docs/screenshots/make_screenshots.sh mcp3008    # some of: spi_gaps-b10 spi_gaps-zoom
#                                                   #   spi_gaps-mcp320x mcp3008 ad7606 mcp2518fd
#
# Needs: apt-get install pulseview xvfb xdotool imagemagick, and the venv
# (make setup). Each shot is a PulseView session setup (.pvs) written by
# 'spigap decoders pvs' with a zoom and a start time; spi_gaps-b10 opens the
# shipped captures/mcp3008-rpi3-k4.4-b10.pvs the way a user does (PulseView
# loads <capture>.pvs by itself). The decoders come from SIGROKDECODE_DIR=
# decoders/, PulseView's settings from a throw-away HOME. A shot fails if
# PulseView logs a decoder error.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$root/docs/screenshots"
spigap="$root/.venv/bin/spigap"
py="$root/.venv/bin/python"
[ -x "$spigap" ] || spigap=spigap
[ -x "$py" ] || py=python3
for tool in pulseview xvfb-run xdotool import convert; do
  command -v "$tool" >/dev/null || { echo "missing $tool: apt-get install pulseview xvfb xdotool imagemagick" >&2; exit 1; }
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$root"

# start TIME of transfer K of CAPTURE minus MARGIN µs (analyzer options after --)
start_of() {
  "$py" - "$@" <<'EOF'
import sys
from spigap.api import SpiConfig, analyze_file
cap, k, margin = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
kw = dict(a.split("=", 1) for a in sys.argv[4:])
kw = {key: (int(v) if v.isdigit() else v) for key, v in kw.items()}
a = analyze_file(cap, SpiConfig(**kw))
print(f"{a.start[k] * a.tick_s * 1e6 - margin:.3f}us")
EOF
}

# name | capture | how to get the .pvs | height of the crop (px)
declare -A CAPTURE PVS HEIGHT
CAPTURE[spi_gaps-b10]=captures/mcp3008-rpi3-k4.4-b10.sr
PVS[spi_gaps-b10]=shipped
HEIGHT[spi_gaps-b10]=590

CAPTURE[spi_gaps-zoom]=captures/mcp3008-rpi3-k4.4-b10.sr
HEIGHT[spi_gaps-zoom]=590

CAPTURE[spi_gaps-mcp320x]=captures/mcp3008-rpi3-mcp320x-iio.sr
HEIGHT[spi_gaps-mcp320x]=590

CAPTURE[mcp3008]=captures/mcp3008-patterns.sr
HEIGHT[mcp3008]=410

CAPTURE[ad7606]=captures/ad7606-dual-after.sr
HEIGHT[ad7606]=630

CAPTURE[mcp2518fd]=captures/mcp2518fd-rx.sr
HEIGHT[mcp2518fd]=510

make_pvs() {   # name -> $tmp/<name>/<capture>.sr + .pvs
  local name="$1" cap="${CAPTURE[$1]}" dir="$tmp/$1"
  mkdir -p "$dir"
  cp "$cap" "$dir/"
  local c="$dir/$(basename "$cap")"
  case "$name" in
    spi_gaps-b10)
      cp "${cap%.sr}.pvs" "${c%.sr}.pvs" ;;
    spi_gaps-zoom)
      "$spigap" decoders pvs "$c" --gaps --stack 'spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0' \
        --scale 4ns --start "$(start_of "$cap" 9 0.4)" >/dev/null ;;
    spi_gaps-mcp320x)
      "$spigap" decoders pvs "$c" --gaps --transfers-per-message 1 \
        --stack 'spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0' \
        --scale 25ns --start "$(start_of "$cap" 3 6)" >/dev/null ;;
    mcp3008)
      "$spigap" decoders pvs "$c" --stack 'spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS,mcp3008' --hide spi \
        --scale 50ns --start "$(start_of "$cap" 1 8)" >/dev/null ;;
    ad7606)
      "$spigap" decoders pvs "$c" \
        --stack 'ad7606:sclk=SCLK:cs=CS:douta=DOUTA:doutb=DOUTB:busy=BUSY:convst=CONVST:frstdata=FRSTDATA' \
        --scale 12ns --start "$(start_of "$cap" 1 8 clk=SCLK cs=CS miso=DOUTA cpol=1)" >/dev/null ;;
    mcp2518fd)
      "$spigap" decoders pvs "$c" --stack 'spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS,mcp2518fd' --hide spi \
        --scale 20ns --start "$(start_of "$cap" 2 3)" >/dev/null ;;
  esac
  echo "$c"
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(spi_gaps-b10 spi_gaps-zoom spi_gaps-mcp320x mcp3008 ad7606 mcp2518fd)
: > "$tmp/list"
for n in "${names[@]}"; do
  [ -n "${CAPTURE[$n]:-}" ] || { echo "unknown screenshot $n" >&2; exit 2; }
  if [ ! -e "${CAPTURE[$n]}" ]; then echo "skip $n: ${CAPTURE[$n]} does not exist" >&2; continue; fi
  echo "$n $(make_pvs "$n") ${HEIGHT[$n]}" >> "$tmp/list"
done

# One X server for all shots: open each capture (its .pvs comes along), make
# the window fill the screen, give the decoders time, grab the screen.
cat > "$tmp/shoot.sh" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
tmp="$1"
while read -r name capture height; do
  home="$tmp/home-$name"; mkdir -p "$home"
  log="$tmp/$name.log"
  HOME="$home" XDG_CONFIG_HOME="$home/config" pulseview -c "$capture" >"$log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do grep -q "Acquisition took" "$log" && break; sleep 0.2; done
  grep -q "Acquisition took" "$log" || { echo "$name: PulseView did not load $capture" >&2; kill $pid; exit 1; }
  for w in $(xdotool search --onlyvisible --class pulseview 2>/dev/null); do
    xdotool windowmove "$w" 0 0 windowsize "$w" 1600 1000 || true
  done
  sleep 5
  import -window root "$tmp/$name-full.png"
  kill -TERM $pid; wait $pid 2>/dev/null || true
done < "$tmp/list"
EOF
chmod +x "$tmp/shoot.sh"
SIGROKDECODE_DIR="$root/decoders" xvfb-run -a -s "-screen 0 1600x1000x24" "$tmp/shoot.sh" "$tmp"

status=0
while read -r name capture height; do
  if grep -E "srd:|Traceback|reported an error" "$tmp/$name.log"; then
    echo "$name: PulseView reported a decoder error (above)" >&2; status=1; continue
  fi
  convert "$tmp/$name-full.png" -crop "1600x${height}+0+0" +repage "$out/$name.png"
  echo "wrote docs/screenshots/$name.png"
done < "$tmp/list"
exit $status

#!/usr/bin/env bash
# Regenerate captures/ad7606-dual-after-decoded.png: PulseView 0.4.2 under
# Xvfb showing the ad7606 decoder on the first conversion of
# captures/ad7606-dual-after.sr: CONVST -> BUSY, tCONV, BUSY fall -> CS fall,
# then V1..V4 on DOUTA and V5..V8 on DOUTB in parallel (64 SCLKs, ±5 V).
# Needs pulseview, xvfb (xvfb-run), xdotool and imagemagick (apt-get install
# pulseview xvfb xdotool imagemagick); run from anywhere:
# ./captures/ad7606-dual-after-decoded.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
py="$root/.venv/bin/python"
[ -x "$py" ] || py=python3

(cd "$root" && "$py" - "$tmp/shot.pvs" <<'EOF'
import sys
from analyzer.cli.decoders import parse_stack
from analyzer.sigrok import pvs
sig = parse_stack("ad7606:sclk=SCLK:cs=CS:douta=DOUTA:doutb=DOUTB:busy=BUSY:convst=CONVST:frstdata=FRSTDATA:range=5V",
                  ["SCLK", "DOUTA", "CS", "DOUTB", "BUSY", "CONVST", "FRSTDATA"])
open(sys.argv[1], "w").write(pvs.render(pvs.Setup([sig], view_scale=7e-9, view_offset=3.9e-6)))
EOF
)

cat > "$tmp/run.sh" <<EOF
#!/usr/bin/env bash
export SIGROKDECODE_DIR="$root/decoders" HOME="$tmp/home"
mkdir -p "\$HOME"
pulseview -s "$tmp/shot.pvs" "$root/captures/ad7606-dual-after.sr" >"$tmp/pulseview.log" 2>&1 &
pid=\$!
sleep 6
for w in \$(xdotool search --onlyvisible --name "PulseView|sr" 2>/dev/null); do
  xdotool windowmove \$w 0 0 windowsize \$w 1600 900
done
sleep 6
import -window root "$tmp/full.png"
kill \$pid; wait \$pid 2>/dev/null || true
EOF
chmod +x "$tmp/run.sh"
xvfb-run -a -s "-screen 0 1600x900x24" "$tmp/run.sh"
if grep -E "srd: .*(Error|Exception)|Traceback" "$tmp/pulseview.log"; then
  echo "PulseView reported a decoder error (log above)" >&2; exit 1
fi
convert "$tmp/full.png" -crop 1600x640+0+0 +repage "$root/captures/ad7606-dual-after-decoded.png"
echo "wrote captures/ad7606-dual-after-decoded.png"

#!/usr/bin/env bash
# Regenerate captures/mcp2518fd-rx-decoded.png: PulseView 0.4.2 under Xvfb
# showing the mcp2518fd decoder on one RX object read (READ_CRC, 200 bit) of
# captures/mcp2518fd-rx.sr. Needs pulseview, xvfb (xvfb-run), xdotool and
# imagemagick (apt-get install pulseview xvfb xdotool imagemagick); run from
# anywhere: ./captures/mcp2518fd-rx-decoded.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
py="$root/.venv/bin/python"
[ -x "$py" ] || py=python3

# A setup with the spi rows hidden and the view on 137.4 us .. 162 us
# (pulseview -s uses it instead of the capture's own .pvs).
(cd "$root" && "$py" - "$tmp/shot.pvs" <<'EOF'
import sys
from analyzer.cli.decoders import parse_stack
from analyzer.sigrok import pvs
sig = parse_stack("spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS,mcp2518fd", ["SCK", "SDI", "SDO", "nCS", "nINT"])
sig.decoders[0].visible = False
open(sys.argv[1], "w").write(pvs.render(pvs.Setup([sig], view_scale=15.5e-9, view_offset=137.4e-6)))
EOF
)

cat > "$tmp/run.sh" <<EOF
#!/usr/bin/env bash
export SIGROKDECODE_DIR="$root/decoders" HOME="$tmp/home"
mkdir -p "\$HOME"
pulseview -s "$tmp/shot.pvs" "$root/captures/mcp2518fd-rx.sr" >"$tmp/pulseview.log" 2>&1 &
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
convert "$tmp/full.png" -crop 1600x510+0+0 +repage "$root/captures/mcp2518fd-rx-decoded.png"
echo "wrote captures/mcp2518fd-rx-decoded.png"

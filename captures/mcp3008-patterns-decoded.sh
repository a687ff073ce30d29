#!/usr/bin/env bash
# Regenerate captures/mcp3008-patterns-decoded.png: PulseView 0.4.2 under Xvfb
# showing the mcp3008 decoder (spi rows hidden) on two conversions of
# captures/mcp3008-patterns.sr: the Linux 0x60|ch<<2 request (start bit at
# clock 2, null bit at clock 8, LSB-first repeat B1..B6) and the MCP3208
# idiom on a differential pair. Needs pulseview, xvfb (xvfb-run), xdotool and
# imagemagick (apt-get install pulseview xvfb xdotool imagemagick); run from
# anywhere: ./captures/mcp3008-patterns-decoded.sh
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
sig = parse_stack("spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS,mcp3008", ["SCLK", "MOSI", "MISO", "CS"])
sig.decoders[0].visible = False
open(sys.argv[1], "w").write(pvs.render(pvs.Setup([sig], view_scale=50e-9, view_offset=49.5e-6)))
EOF
)

cat > "$tmp/run.sh" <<EOF
#!/usr/bin/env bash
export SIGROKDECODE_DIR="$root/decoders" HOME="$tmp/home"
mkdir -p "\$HOME"
pulseview -s "$tmp/shot.pvs" "$root/captures/mcp3008-patterns.sr" >"$tmp/pulseview.log" 2>&1 &
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
convert "$tmp/full.png" -crop 1600x460+0+0 +repage "$root/captures/mcp3008-patterns-decoded.png"
echo "wrote captures/mcp3008-patterns-decoded.png"

#!/usr/bin/env python3
"""Draws Baton's app and tray icons (a baton passed diagonally across a rounded square) at every
size the bundler and the tray need. Run once after changing the design; the PNG/ICO/ICNS files
are committed. Needs Pillow."""
import io
import struct
from pathlib import Path

from PIL import Image, ImageDraw

OUT = Path(__file__).resolve().parent.parent / "src-tauri" / "icons"
BLUE = (52, 87, 213, 255)
GOLD = (255, 210, 74, 255)


def logo(size, bg=BLUE, dot=GOLD, badge=None):
    s = size * 4  # draw large, scale down for smooth edges
    img = Image.new("RGBA", (s, s), (0, 0, 0, 0))
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([0, 0, s - 1, s - 1], radius=s // 4, fill=bg)
    w = max(4, s // 8)
    d.line([(s * 0.28, s * 0.72), (s * 0.72, s * 0.28)], fill=(255, 255, 255, 255), width=w)
    r = s * 0.11
    d.ellipse([s * 0.72 - r, s * 0.28 - r, s * 0.72 + r, s * 0.28 + r], fill=dot)
    if badge:
        br = s * 0.2
        cx, cy = s - br - s * 0.02, s - br - s * 0.02
        d.ellipse([cx - br - s * 0.03, cy - br - s * 0.03, cx + br + s * 0.03, cy + br + s * 0.03], fill=(255, 255, 255, 255))
        d.ellipse([cx - br, cy - br, cx + br, cy + br], fill=badge)
    return img.resize((size, size), Image.LANCZOS)


def png_bytes(img):
    b = io.BytesIO()
    img.save(b, "PNG")
    return b.getvalue()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, size in [("32x32.png", 32), ("64x64.png", 64), ("128x128.png", 128), ("128x128@2x.png", 256), ("icon.png", 512)]:
        logo(size).save(OUT / name)
    logo(256).save(OUT / "icon.ico", sizes=[(16, 16), (24, 24), (32, 32), (48, 48), (64, 64), (128, 128), (256, 256)])
    # ICNS: header + PNG-encoded entries (ic07 128, ic08 256, ic09 512, ic10 1024).
    chunks = b""
    for tag, size in [(b"ic07", 128), (b"ic08", 256), (b"ic09", 512), (b"ic10", 1024)]:
        data = png_bytes(logo(size))
        chunks += tag + struct.pack(">I", len(data) + 8) + data
    (OUT / "icon.icns").write_bytes(b"icns" + struct.pack(">I", len(chunks) + 8) + chunks)
    # Tray states: all good / some cooling / nothing available / paused.
    logo(64).save(OUT / "tray-ok.png")
    logo(64, badge=(240, 160, 20, 255)).save(OUT / "tray-cooling.png")
    logo(64, bg=(178, 38, 30, 255), badge=None).save(OUT / "tray-down.png")
    logo(64, bg=(120, 126, 140, 255), dot=(210, 214, 222, 255)).save(OUT / "tray-paused.png")


if __name__ == "__main__":
    main()

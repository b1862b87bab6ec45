"""The contended call stacks of `lockbench profile --stacks N` (profile/lockprof_stacks.cpp):
each dump's stacks (return addresses, leaf first, and the nanoseconds waited there) named
frame by frame as the lock sites are named (analysis/lockprof/symbols.py: .symtab, a debug
file, .dynsym; `object+0xoffset` where an object is stripped), written in the folded-stacks
format that flame-graph tools read (`root;...;leaf weight`, one stack a line, the weight in
nanoseconds waited; Brendan Gregg's flamegraph.pl, speedscope, inferno) and drawn as a flame
graph: an SVG built with the standard library's ElementTree (which escapes every name),
the root at the bottom as flamegraph.pl draws it, each frame's name, wait and share in its
tooltip. Standard library only."""

import bisect
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

from analysis.lockprof.symbols import Symbols, demangle

SVG_NS = "http://www.w3.org/2000/svg"
WIDTH = 1200          # px, as flamegraph.pl
ROW = 17              # px per frame
PAD = 10
TITLE_ROOM = 40
MIN_PX = 0.1          # narrower frames are not drawn (their wait stays in their parents)
FONT_PX = 7.0         # px per character of the 12 px monospace labels, to cut them to fit


class Objects:
    """Which loaded object holds an address, from a dump's "objects" (their executable
    segments), and the address's offset in it."""

    def __init__(self, objects: list):
        segs = []
        for o in objects:
            for lo, hi in o["text"]:
                segs.append((int(lo, 16), int(hi, 16), o["path"], int(o["base"], 16)))
        segs.sort()
        self.segs = segs
        self.starts = [s[0] for s in segs]

    def find(self, addr: int) -> tuple | None:
        """(object path, address - its base) or None."""
        i = bisect.bisect_right(self.starts, addr - 1) - 1
        if i >= 0 and addr - 1 < self.segs[i][1]:
            return self.segs[i][2], addr - self.segs[i][3]
        return None


def frame_name(syms: Symbols, objs: Objects, addr: int) -> str:
    """The function holding return address addr ('object+0xoffset' where the object has no
    symbol for it), as one frame of a folded line (no ';', no line break)."""
    found = objs.find(addr)
    if found is None:
        return f"0x{addr:x}"
    path, vaddr = found
    named = syms.name(path, vaddr)
    name = named.rsplit("+0x", 1)[0] if named else f"{Path(path).name}+0x{vaddr:x}"
    return name.replace(";", ":").replace("\n", " ")


def folded(docs: list) -> dict:
    """{'root;...;leaf': nanoseconds waited} over every process's dump, the pthread function
    that waited as the leaf; stacks that name the same frames add up."""
    syms, out = Symbols(), {}
    named = []
    for d in docs:
        objs = Objects(d.get("objects") or [])
        for s in d.get("stacks", {}).get("list", []):
            frames = [frame_name(syms, objs, int(f, 16)) for f in reversed(s["frames"])]
            named.append((frames + [s["call"]], s["wait_ns"]))
    plain = demangle([f for frames, _ in named for f in frames])
    for frames, ns in named:
        key = ";".join(plain.get(f, f).replace(";", ":") for f in frames)
        out[key] = out.get(key, 0) + ns
    return out


def totals(docs: list) -> dict:
    """What the stack tables held and what did not fit, over every process."""
    stacks = [d["stacks"] for d in docs if "stacks" in d]
    listed = [s for st in stacks for s in st["list"]]
    return {"stacks": len(listed), "waits": sum(s["count"] for s in listed),
            "wait_ns": sum(s["wait_ns"] for s in listed),
            "lost": sum(st["lost"] for st in stacks),
            "lost_wait_ns": sum(st["lost_wait_ns"] for st in stacks),
            "depth": max((st["depth"] for st in stacks), default=0)}


def folded_text(stacks: dict) -> str:
    """The folded-stacks file: one 'frames weight' line a stack, sorted by its frames."""
    return "".join(f"{k} {v}\n" for k, v in sorted(stacks.items()) if v > 0)


# ---- the flame graph ---------------------------------------------------------------------------

def tree(stacks: dict) -> dict:
    """The stacks merged from the root: {name: [weight, children]}."""
    root: dict = {}
    for key, ns in stacks.items():
        level = root
        for name in key.split(";"):
            node = level.setdefault(name, [0, {}])
            node[0] += ns
            level = node[1]
    return root


def colour(name: str) -> str:
    """A warm colour (flamegraph.pl's palette), steady per name."""
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{(h >> 8) % 180},{(h >> 16) % 55})"


def depth_of(level: dict) -> int:
    return 1 + max((depth_of(c) for _, c in level.values()), default=0) if level else 0


def _frame(svg, name: str, x: float, y: float, w: float, ns: int, total: int) -> None:
    g = ET.SubElement(svg, "g")
    ET.SubElement(g, "title").text = f"{name} ({ns:,} ns waited, {100 * ns / total:.2f}%)"
    ET.SubElement(g, "rect", x=f"{x:.2f}", y=str(y), width=f"{w:.2f}", height=str(ROW - 1),
                  fill=colour(name), rx="2", ry="2")
    fits = int((w - 6) / FONT_PX)
    if fits >= 3:
        label = name if len(name) <= fits else name[:fits - 2] + ".."
        ET.SubElement(g, "text", x=f"{x + 3:.2f}", y=str(y + ROW - 5)).text = label


def _draw(svg, level: dict, x: float, depth: int, scale: float, bottom: int, total: int):
    for name, (ns, children) in sorted(level.items()):
        w = ns * scale
        if w >= MIN_PX:
            _frame(svg, name, x, bottom - (depth + 1) * ROW, w, ns, total)
            _draw(svg, children, x, depth + 1, scale, bottom, total)
        x += w


def flame_svg(stacks: dict, title: str) -> bytes:
    """The flame graph of the folded stacks as an SVG document (the root at the bottom, a
    frame as wide as the time waited under it)."""
    below = tree(stacks)
    total = sum(ns for ns, _ in below.values())
    root = {"all": [total, below]}  # one root, as flamegraph.pl draws it
    height = TITLE_ROOM + depth_of(root) * ROW + 2 * PAD
    svg = ET.Element("svg", xmlns=SVG_NS, width=str(WIDTH), height=str(height),
                     viewBox=f"0 0 {WIDTH} {height}", version="1.1")
    ET.SubElement(svg, "style").text = ("text { font-family: monospace; font-size: 12px; "
                                        "fill: black; pointer-events: none; }")
    ET.SubElement(svg, "rect", x="0", y="0", width=str(WIDTH), height=str(height),
                  fill="#f8f8f0")
    head = ET.SubElement(svg, "text", x=str(WIDTH // 2), y="24")
    head.set("text-anchor", "middle")
    head.text = title if total else f"{title}: no acquisition waited"
    _draw(svg, root, float(PAD), 0, (WIDTH - 2 * PAD) / max(total, 1), height - PAD, total)
    return ET.tostring(svg, encoding="utf-8", xml_declaration=True) + b"\n"


def write(docs: list, folded_path: Path, svg_path: Path, title: str) -> dict:
    """Writes the folded stacks and their flame graph; what the tables held (totals)."""
    stacks = folded(docs)
    folded_path.write_text(folded_text(stacks))
    svg_path.write_bytes(flame_svg(stacks, title))
    return totals(docs)

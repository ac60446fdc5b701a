#!/usr/bin/env python3
"""Suite 'html': each HTML form tbanalyze writes, opened in headless Chromium.

Usage: check_html.py GEN_PLANTED FORM OUTDIR
  FORM: report-gpu (gen_planted planted: findings, breakdown, idle, timeline),
        report-demo (`tbprof demo`'s trace: simtorch on simgpu, the model's source lines),
        report-steps (gen_planted markers: the time per step plot too),
        report-cpu (gen_planted cpu-steps: a CPU run, host tables, steps),
        diff (two gen_planted steps-noise runs, the second 10 % slower),
        ranks (gen_planted rank: four ranks, rank 2 the straggler).
For each: no page error, no request outside the page, no horizontal
overflow at 800, 1000 and 2560 px, each plot an <svg> with its aria-label
and drawn (width > 0), the first finding's user line and advice inside a
1000 x 900 viewport; for a timeline, the wheel over it zooms in (the range
in view shrinks) and a drag pans it.  A screenshot of each form at 1000 px
goes to OUTDIR (the build directory) for a human to look at.

Chromium is Debian's (/usr/bin/chromium, or TBP_CHROMIUM), driven by
Playwright from PyPI (no browser download).  Without either the test says
so and exits 77 (meson's skip).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

TBANALYZE = os.environ.get("TBANALYZE", "tbanalyze")
SKIP = 77
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
    return cond


def chromium_path():
    for p in (os.environ.get("TBP_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if p and os.access(p, os.X_OK):
            return p
    return shutil.which("chromium")


def gen(gen_path, tmp, scenario, name=None, *extra):
    name = name or scenario
    trace, expect = os.path.join(tmp, name + ".zst"), os.path.join(tmp, name + ".json")
    subprocess.run([gen_path, scenario, trace, expect] + list(extra), check=True, timeout=120)
    return trace


def tba(args, ok_rcs=(0,)):
    p = subprocess.run([TBANALYZE] + args, capture_output=True, text=True, timeout=300)
    check(p.returncode in ok_rcs, f"tbanalyze {' '.join(os.path.basename(a) for a in args)}: exit {p.returncode} "
          f"{p.stderr.strip()[-300:]}")
    return p


def make_form(gen_path, form, tmp):
    """Writes the form's page; returns (page path, plot labels expected, has findings, has timeline)."""
    page = os.path.join(tmp, form + ".html")
    if form == "report-gpu":
        tba([gen(gen_path, tmp, "planted"), "--html", page])
        return page, ["Execution time breakdown", "Idle time by cause", "Timeline per stream"], True, True
    if form == "report-steps":
        tba([gen(gen_path, tmp, "markers"), "--html", page])
        return page, ["Time per step", "Execution time breakdown", "Idle time by cause", "Timeline per stream"], True, True
    if form == "report-cpu":
        tba([gen(gen_path, tmp, "cpu-steps"), "--html", page])
        return page, ["Time per step"], False, False
    if form == "report-demo":
        trace = os.path.join(tmp, "demo.zst")
        env = {k: v for k, v in os.environ.items() if not k.startswith("TBPROF_") and k != "LD_PRELOAD"}
        p = subprocess.run([os.environ["TBPROF_CMD"], "demo", "-o", trace], cwd=tmp, env=env, capture_output=True,
                           text=True, timeout=600)
        check(p.returncode == 0, f"tbprof demo: exit {p.returncode} {p.stderr[-500:]!r}")
        tba([trace, "--html", page])
        return page, ["Time per step", "Execution time breakdown", "Idle time by cause", "Timeline per stream"], True, True
    if form == "diff":
        a = gen(gen_path, tmp, "steps-noise", "a", "101,0,30,marks")
        b = gen(gen_path, tmp, "steps-noise", "b", "301,10,30,marks")
        tba(["diff", a, b, "--html", page], ok_rcs=(0, 1))
        return page, ["Step time distributions", "Changes by kernel and site"], False, False
    if form == "ranks":
        d = os.path.join(tmp, "ranks")
        os.makedirs(d)
        for r in range(4):
            ej = os.path.join(tmp, "rank.json")
            subprocess.run([gen_path, "rank", os.path.join(d, f"rank{r}.zst"), ej, f"{r},4,2,c10d"], check=True,
                           timeout=60)
        tba([d, "--html", page])
        return page, ["Step time per rank"], True, False
    raise SystemExit(f"unknown form {form}")


def in_viewport(box, w, h):
    return box is not None and box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= w + 0.5 \
        and box["y"] + box["height"] <= h + 0.5


def check_page(pw, chromium, form, page_path, labels, has_findings, has_timeline, outdir):
    browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                 args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
    try:
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        errors, outside = [], []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(("file:", "data:", "about:")) else None)
        url = "file://" + os.path.abspath(page_path)
        page.goto(url)
        page.wait_for_load_state("load")
        for width in (800, 1000, 2560):
            page.set_viewport_size({"width": width, "height": 900})
            page.wait_for_timeout(100)
            sw, cw = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            check(sw <= cw, f"{form}: no horizontal overflow at {width} px (scrollWidth {sw}, clientWidth {cw})")
        page.set_viewport_size({"width": 1000, "height": 900})
        page.wait_for_timeout(100)
        # Legends: no entry drawn over another (issue 32: "launch_bound 81.5%" over "host_other 4.5%").
        overlaps = page.evaluate("""(() => { const bad = [];
            document.querySelectorAll('ul.legend').forEach(ul => {
              const r = [...ul.children].map(li => li.getBoundingClientRect());
              for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++)
                if (r[i].left < r[j].right - 0.5 && r[j].left < r[i].right - 0.5 &&
                    r[i].top < r[j].bottom - 0.5 && r[j].top < r[i].bottom - 0.5)
                  bad.push(ul.children[i].textContent + ' / ' + ul.children[j].textContent);
            }); return bad; })()""")
        check(not overlaps, f"{form}: no legend entries overlap at 1000 px ({overlaps[:3]})")
        # Nor the labels drawn inside a plot.
        clash = page.evaluate("""(() => { const bad = [];
            document.querySelectorAll('svg[aria-label]').forEach(svg => {
              const t = [...svg.querySelectorAll('text')].filter(x => x.textContent.trim());
              const r = t.map(x => x.getBoundingClientRect());
              for (let i = 0; i < r.length; i++) for (let j = i + 1; j < r.length; j++)
                if (r[i].left < r[j].right - 1 && r[j].left < r[i].right - 1 &&
                    r[i].top < r[j].bottom - 1 && r[j].top < r[i].bottom - 1)
                  bad.push(svg.getAttribute('aria-label') + ': ' + t[i].textContent + ' / ' + t[j].textContent);
            }); return bad; })()""")
        check(not clash, f"{form}: no two labels of a plot drawn over each other at 1000 px ({clash[:3]})")
        for label in labels:
            el = page.query_selector(f'svg[aria-label="{label}"]')
            box = el.bounding_box() if el else None
            check(box is not None and box["width"] > 100 and box["height"] > 10,
                  f"{form}: plot '{label}' present and drawn ({box})")
        if has_findings:
            page.evaluate("window.scrollTo(0, 0)")
            line = page.query_selector("#finding-1 .user-line")
            advice = page.query_selector("#finding-1 .advice")
            lb, ab = line and line.bounding_box(), advice and advice.bounding_box()
            check(in_viewport(lb, 1000, 900), f"{form}: the first finding's user line inside the 1000x900 viewport ({lb})")
            check(in_viewport(ab, 1000, 900), f"{form}: the first finding's advice inside the 1000x900 viewport ({ab})")
            check(advice is not None and len(advice.inner_text().strip()) > 20, f"{form}: the advice has words")
            if form == "report-demo":
                # The model's files are there when the report is made: the line's source text is shown.
                src = page.query_selector("#finding-1 .src")
                sb = src and src.bounding_box()
                check(in_viewport(sb, 1000, 900) and len(src.inner_text().split("|", 1)[-1].strip()) > 3,
                      f"{form}: the first finding's source line shown in the viewport ({src and src.inner_text()!r})")
        page.screenshot(path=os.path.join(outdir, f"html-{form}.png"), full_page=True)
        if has_timeline:
            tl = page.query_selector("svg.timeline")
            tl.scroll_into_view_if_needed()
            rng = lambda: page.evaluate("(() => { const s = document.querySelector('svg.timeline');"
                                        " return [+s.getAttribute('data-v0'), +s.getAttribute('data-v1')]; })()")
            v0, v1 = rng()
            box = tl.bounding_box()
            page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
            page.mouse.wheel(0, -400)
            page.wait_for_timeout(200)
            z0, z1 = rng()
            check(z1 - z0 < (v1 - v0) * 0.8 and z0 >= v0 and z1 <= v1,
                  f"{form}: the wheel zooms the timeline in ({v0:.0f}-{v1:.0f} -> {z0:.0f}-{z1:.0f} ns)")
            shown = page.inner_text("#tl-range")
            check(shown and "of" in shown, f"{form}: the range in view is said ({shown!r})")
            page.mouse.move(box["x"] + box["width"] * 0.6, box["y"] + box["height"] / 2)
            page.mouse.down()
            page.mouse.move(box["x"] + box["width"] * 0.8, box["y"] + box["height"] / 2, steps=4)
            page.mouse.up()
            p0, p1 = rng()
            check(p0 < z0 and abs((p1 - p0) - (z1 - z0)) < 1 + 1e-6 * (z1 - z0),
                  f"{form}: a drag pans the timeline ({z0:.0f} -> {p0:.0f} ns, same span)")
            titles = page.evaluate("[...document.querySelectorAll('svg.timeline rect.ev title')].map(t => t.textContent)")
            one = [t.split("\n") for t in titles if t.count("\n") == 2]
            check(one and any(len(x) == 3 and " at " in x[1] and ".py:" in x[2] for x in one),
                  f"{form}: kernels and copies drawn with their hover text: name, duration, Python line "
                  f"({len(titles)}; {titles[:1]!r})")
            page.screenshot(path=os.path.join(outdir, f"html-{form}-zoomed.png"))
        check(not errors, f"{form}: no page errors ({errors[:3]})")
        check(not outside, f"{form}: no request outside the page ({outside[:3]})")
    finally:
        browser.close()


def main():
    gen_path, form, outdir = sys.argv[1], sys.argv[2], sys.argv[3]
    chromium = chromium_path()
    if not chromium:
        print("SKIP: no Chromium (apt-get install chromium, or TBP_CHROMIUM=path)")
        return SKIP
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("SKIP: no Playwright for this Python (pip install playwright; the browser is Debian's chromium)")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="tba-html-") as tmp:
        page, labels, has_findings, has_timeline = make_form(gen_path, form, tmp)
        if not check(os.path.exists(page), f"{form}: the page was written"):
            return 1
        with open(page) as f:
            html = f.read()
        check(html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>"), f"{form}: a complete page")
        os.makedirs(outdir, exist_ok=True)
        shutil.copy(page, os.path.join(outdir, f"html-{form}.html"))
        with sync_playwright() as pw:
            check_page(pw, chromium, form, page, labels, has_findings, has_timeline, outdir)
    print(f"screenshots: {outdir}/html-{form}*.png")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reads a trace through `tbanalyze dump --json` into Python objects:
records, and call paths resolved to [(file, line, function), ...] leaf first."""
import json
import os
import subprocess


class Trace:
    def __init__(self, path, tbanalyze=None):
        tbanalyze = tbanalyze or os.environ["TBANALYZE"]
        out = subprocess.run([tbanalyze, "dump", path, "--json"], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError("tbanalyze dump failed (%d): %s" % (out.returncode, out.stderr.strip()))
        self.records = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
        self.strings = {}
        self.frames = {}
        self.paths = {}
        for r in self.records:
            if r["kind"] == "string":
                self.strings[r["id"]] = r["blob"]
            elif r["kind"] == "pyframe":
                self.frames[r["id"]] = r
            elif r["kind"] == "callpath":
                self.paths[r["id"]] = (r["frame"], r["parent"])

    def of_kind(self, *kinds):
        return [r for r in self.records if r["kind"] in kinds]

    def path(self, callpath):
        out = []
        seen = 0
        while callpath and seen < 100000:
            frame, callpath = self.paths[callpath]
            f = self.frames[frame]
            out.append((self.strings.get(f["file"], "?"), f["line"], self.strings.get(f["function"], "?")))
            seen += 1
        return out

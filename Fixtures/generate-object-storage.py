#!/usr/bin/env python3
"""Writes Fixtures/object-storage/signatures.json: requests signed by the storage
providers' own SDKs (botocore's S3SigV4Auth, google-auth's service account JWT,
azure-storage-blob's SharedKeyCredentialPolicy) at fixed times, so the tests hold our
signers to theirs, never to our own output.

Run once, in a virtual environment with botocore, google-auth, cryptography and
azure-storage-blob (scripts/storage-servers.sh install makes one):
    .build/storage-venv/bin/python Fixtures/generate-object-storage.py
"""
import base64
import datetime
import json
import pathlib
from unittest import mock

import botocore.auth
import botocore.awsrequest
import botocore.credentials
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

OUT = pathlib.Path(__file__).parent / "object-storage" / "signatures.json"
WHEN = datetime.datetime(2026, 11, 28, 12, 0, 0, tzinfo=datetime.timezone.utc)


def s3_cases():
    cases = []
    table = [
        # (name, url as sent, region, token, method, extra headers, body)
        ("path style, a key with a space and a plus", "http://127.0.0.1:9000/photos/cats/tabby%20cat%2B1.jpg",
         "us-east-1", None, "GET", {}, b""),
        ("virtual host, a version, a session token", "https://photos.s3.eu-west-1.amazonaws.com/2026/cat.jpg?versionId=3HL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY",
         "eu-west-1", "FQoGZXIvYXdzEXAMPLETOKEN//////////wEaDJ+/=", "GET", {}, b""),
        ("unicode and reserved characters in the key", "http://minio.local:9000/b/%C3%BCber/%C3%9F~%3D%26.png",
         "auto", None, "GET", {}, b""),
        ("a write with a body, a type and metadata", "http://127.0.0.1:9000/results/ab/cd/abcdef",
         "us-east-1", None, "PUT", {"Content-Type": "image/webp", "x-amz-meta-etag": "\"abc\""}, b"RIFF\x00\x00\x00\x00WEBP"),
    ]
    for name, url, region, token, method, headers, body in table:
        credentials = botocore.credentials.Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", token)
        request = botocore.awsrequest.AWSRequest(method=method, url=url, headers=dict(headers), data=body)
        auth = botocore.auth.S3SigV4Auth(credentials, "s3", region)
        with mock.patch("botocore.auth.datetime") as fake:
            fake.datetime.now.return_value = WHEN.replace(tzinfo=None)
            fake.datetime.utcnow.return_value = WHEN.replace(tzinfo=None)
            fake.timezone = datetime.timezone
            auth.add_auth(request)
        cases.append({
            "name": name, "url": url, "region": region, "sessionToken": token, "method": method,
            "headers": headers, "body": base64.b64encode(body).decode(),
            "amzDate": request.headers["X-Amz-Date"], "contentSHA256": request.headers["X-Amz-Content-SHA256"],
            "authorization": request.headers["Authorization"],
        })
    return cases


def gcs_case():
    import google.auth._helpers
    from google.oauth2 import service_account

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    info = {
        "type": "service_account", "project_id": "imageloader-test", "private_key_id": "0123456789abcdef",
        "private_key": pem, "client_email": "thumbnails@imageloader-test.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": "https://oauth2.googleapis.com/token",
    }
    credentials = service_account.Credentials.from_service_account_info(
        info, scopes=["https://www.googleapis.com/auth/devstorage.read_write"])
    with mock.patch.object(google.auth._helpers, "utcnow", return_value=WHEN.replace(tzinfo=None)):
        assertion = credentials._make_authorization_grant_assertion()
    return {"key": json.dumps(info), "publicKey": public, "issuedAt": int(WHEN.timestamp()),
            "assertion": assertion.decode() if isinstance(assertion, bytes) else assertion}


def azure_cases():
    from azure.core.pipeline import PipelineContext, PipelineRequest
    from azure.core.rest import HttpRequest
    from azure.storage.blob._shared.authentication import SharedKeyCredentialPolicy

    account_key = base64.b64encode(bytes(range(64))).decode()
    table = [
        ("a read with validators", "GET", "https://photos.blob.core.windows.net/originals/cats/tabby%20cat.jpg",
         {"x-ms-date": "Sat, 28 Nov 2026 12:00:00 GMT", "x-ms-version": "2021-08-06",
          "If-None-Match": "\"0x8DC0FFEE\"", "If-Modified-Since": "Fri, 27 Nov 2026 12:00:00 GMT"}, b""),
        ("an emulator's path with the account in it", "GET", "http://127.0.0.1:10000/photos/originals/a.png",
         {"x-ms-date": "Sat, 28 Nov 2026 12:00:00 GMT", "x-ms-version": "2021-08-06"}, b""),
        ("a write with metadata", "PUT", "https://photos.blob.core.windows.net/results/ab/cdef",
         {"x-ms-date": "Sat, 28 Nov 2026 12:00:00 GMT", "x-ms-version": "2021-08-06", "x-ms-blob-type": "BlockBlob",
          "Content-Type": "image/webp", "Content-Length": "12", "x-ms-meta-etag": "\"abc\""}, b"RIFF\x00\x00\x00\x00WEBP"),
    ]
    cases = []
    for name, method, url, headers, body in table:
        request = HttpRequest(method, url, headers=dict(headers), content=body or None)
        policy = SharedKeyCredentialPolicy("photos", account_key)
        policy.on_request(PipelineRequest(request, PipelineContext(None)))
        cases.append({"name": name, "method": method, "url": url, "headers": headers,
                      "bodyLength": len(body), "authorization": request.headers["Authorization"]})
    return {"accountName": "photos", "accountKey": account_key, "cases": cases}


OUT.parent.mkdir(parents=True, exist_ok=True)
OUT.write_text(json.dumps({"s3": s3_cases(), "gcs": gcs_case(), "azure": azure_cases()}, indent=1) + "\n")
print("wrote", OUT)

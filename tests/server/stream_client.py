#!/usr/bin/env python3
"""A streaming hourglassd client, as a Python program would write one.

Usage: stream_client.py [--leave-after K] URL BODY [NAME: VALUE ...]

POSTs BODY to URL, reads the chunked response as it comes, and prints one
JSON object: {"status", "headers", "chunks": [...], "trailers": {...},
"complete": bool}. With --leave-after K it hangs up after K chunks, as a
caller that went away mid-stream (then "complete" is false). The standard library's http.client reads chunked bodies
but drops their trailers, and the trailers are the point here (Job-Outcome
tells complete output from interrupted output), so the chunked framing is
read off the socket (RFC 9112 section 7.1).
"""
import json
import socket
import sys
import urllib.parse


def read_line(f):
    line = f.readline(65537)
    if not line.endswith(b"\r\n"):
        raise ValueError("line without CRLF: %r" % line)
    return line[:-2].decode("latin-1")


def read_fields(f):
    fields = {}
    while True:
        line = read_line(f)
        if not line:
            return fields
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()


def main():
    args = sys.argv[1:]
    leave_after = None
    if args[0] == "--leave-after":
        leave_after = int(args[1])
        args = args[2:]
    url = urllib.parse.urlsplit(args[0])
    body = args[1].encode()
    extra = [h.split(":", 1) for h in args[2:]]
    with socket.create_connection((url.hostname, url.port), timeout=30) as s:
        head = "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n" % (url.path, url.netloc)
        head += "".join("%s: %s\r\n" % (n.strip(), v.strip()) for n, v in extra)
        head += "Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        s.sendall(head.encode() + body)
        f = s.makefile("rb")
        status = int(read_line(f).split(" ")[1])
        headers = read_fields(f)
        out = {"status": status, "headers": headers, "chunks": [], "trailers": {}, "complete": False}
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(read_line(f).split(";")[0], 16)
                if size == 0:
                    out["trailers"] = read_fields(f)
                    out["complete"] = True
                    break
                out["chunks"].append(f.read(size).decode())
                if f.read(2) != b"\r\n":
                    raise ValueError("chunk without CRLF")
                if leave_after is not None and len(out["chunks"]) >= leave_after:
                    break  # the with-block closes the socket: gone mid-stream
        else:
            out["chunks"].append(f.read(int(headers.get("content-length", "0"))).decode())
    print(json.dumps(out))


if __name__ == "__main__":
    main()

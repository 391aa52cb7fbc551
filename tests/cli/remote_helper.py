#!/usr/bin/env python3
"""remote_helper.py -- what tests/cli/test_remote_cache.sh needs besides the
Redis server: servers that fail, and entries tampered with.

  remote_helper.py port
      prints a loopback port that nothing listens on
  remote_helper.py serve MODE PORTFILE
      listens on a loopback port (written to PORTFILE) and, for every
      connection, answers nothing (stall), a line that is not Redis's
      protocol (garbage), or, once a command arrived, a hostile reply: a
      status line dripped one byte every 10 ms (drip), an integer line that
      never ends (long-line), a 1 GiB bulk string header and its bytes
      (huge-bulk), a multi-bulk header of 2^31-1 elements and integers
      (huge-array), each for at most 64 MiB or 10 s; stops by itself after
      120 s
  remote_helper.py tamper HOST PORT DB KEYFILE ACTION KEY [OTHER]
      changes the entry stored under Redis key KEY: flip (one payload byte),
      other-secret (re-signed with another secret), copy (the entry of OTHER
      put under KEY), material (its key material changed, re-signed with the
      fleet secret in KEYFILE), oversize (a 65 MiB value)

The entry layout is runtime/remote_cache.h's: a 64-byte header (key
material, metadata and payload sizes at offsets 8, 12, 16), the three parts,
then HMAC-SHA256 over everything before it.
"""
import hashlib
import hmac
import socket
import struct
import sys
import threading
import time


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


HOSTILE = {"drip": (b"+", b"x"), "long-line": (b":", b"1" * 65536), "huge-bulk": (b"$1073741824\r\n", bytes(65536)),
           "huge-array": (b"*2147483647\r\n", b":1\r\n" * 16384)}


def hostile(c, mode):
    head, chunk = HOSTILE[mode]
    try:
        c.settimeout(5)
        if not c.recv(4096):
            return
        c.sendall(head)
        sent, end = 0, time.time() + 10
        while sent < (64 << 20) and time.time() < end:
            if mode == "drip":
                time.sleep(0.01)
            c.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass
    finally:
        c.close()


def serve(mode, portfile):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.5)
    with open(portfile, "w") as f:
        f.write(str(srv.getsockname()[1]))
    held = []

    def garbage(c):
        try:
            c.settimeout(5)
            c.recv(4096)
            c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        c.close()

    end = time.time() + 120
    while time.time() < end:
        try:
            c, _ = srv.accept()
        except socket.timeout:
            continue
        if mode == "stall":
            held.append(c)  # read nothing, answer nothing
        elif mode in HOSTILE:
            threading.Thread(target=hostile, args=(c, mode), daemon=True).start()
        else:
            threading.Thread(target=garbage, args=(c,), daemon=True).start()
    for c in held:
        c.close()


class Redis:
    """Just enough of the protocol for GET and SET of binary values."""

    def __init__(self, host, port, db):
        self.s = socket.create_connection((host, int(port)), timeout=30)
        self.f = self.s.makefile("rb")
        self.cmd("SELECT", db)

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.reply()

    def reply(self):
        line = self.f.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        raise RuntimeError("unexpected reply %r" % line)


def tamper(host, port, db, keyfile, action, key, other=None):
    r = Redis(host, port, db)
    e = r.cmd("GET", key)
    if e is None:
        raise SystemExit("no entry under %s" % key)
    e = bytearray(e)
    mat, meta, size = struct.unpack_from("<IIQ", e, 8)
    if action == "flip":
        e[64 + mat + meta + size // 2] ^= 0x01
    elif action == "other-secret":
        e[-32:] = hmac.new(b"not the fleet secret, but long enough", bytes(e[:-32]), hashlib.sha256).digest()
    elif action == "copy":
        e = bytearray(r.cmd("GET", other))
    elif action == "material":
        region = bytes(e[64:64 + mat])
        for old, new in ((b"sm_90", b"sm_80"), (b"NVRTC", b"NVRTX"), (b"source", b"sourcf")):
            if old in region:
                region = region.replace(old, new, 1)
                break
        else:
            raise SystemExit("nothing to change in the key material")
        e[64:64 + mat] = region
        with open(keyfile, "rb") as f:
            secret = f.read()
        e[-32:] = hmac.new(secret, bytes(e[:-32]), hashlib.sha256).digest()
    elif action == "oversize":
        e = bytearray(65 << 20)
        e[:4] = b"FGRC"
    else:
        raise SystemExit("unknown action %s" % action)
    r.cmd("SET", key, bytes(e))


def main(argv):
    if argv[1:2] == ["port"]:
        print(free_port())
    elif argv[1:2] == ["serve"] and len(argv) == 4 and argv[2] in ("stall", "garbage", *HOSTILE):
        serve(argv[2], argv[3])
    elif argv[1:2] == ["tamper"] and len(argv) in (8, 9):
        tamper(*argv[2:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)

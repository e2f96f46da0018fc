"""A loopback TLS proxy through which TensorFlow's own `gs://` client (its
endpoints built in: https://www.googleapis.com, https://storage.googleapis.com)
reaches a fake-gcs-server on 127.0.0.1 (`object_stores.gcs_tf_proxy`).

It takes only CONNECT to those hosts, ends TLS with a certificate of a
throwaway CA (the only one in TF's CURL_CA_BUNDLE) and forwards each request
to the server over plain HTTP, mending what the server would refuse: TF's
`Transfer-Encoding` headers (501) and chunked uploads, and upload-session
URLs the server builds as http (TF must come back through the proxy).
"""

import datetime
import http.client
import http.server
import os
import socketserver
import ssl
import urllib.parse

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")


def write_certificates(folder):
  """A throwaway CA (the only one in TF's CURL_CA_BUNDLE) and a server
  certificate it signs for GOOGLE_HOSTS; returns (ca, cert, key) paths."""
  from cryptography import x509
  from cryptography.hazmat.primitives import hashes, serialization
  from cryptography.hazmat.primitives.asymmetric import ec
  from cryptography.x509.oid import NameOID

  now = datetime.datetime.now(datetime.timezone.utc)
  start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=7)

  def name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
  ca_key = ec.generate_private_key(ec.SECP256R1())
  ca = (x509.CertificateBuilder()
        .subject_name(name("xlnet-tf test CA")).issuer_name(name("xlnet-tf test CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True,
            content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256()))
  key = ec.generate_private_key(ec.SECP256R1())
  cert = (x509.CertificateBuilder()
          .subject_name(name(GOOGLE_HOSTS[0])).issuer_name(ca.subject)
          .public_key(key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(start).not_valid_after(end)
          .add_extension(x509.SubjectAlternativeName(
              [x509.DNSName(h) for h in GOOGLE_HOSTS]), critical=False)
          .add_extension(x509.BasicConstraints(ca=False, path_length=None),
                         critical=True)
          .add_extension(x509.ExtendedKeyUsage(
              [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
          .sign(ca_key, hashes.SHA256()))
  paths = [os.path.join(str(folder), n) for n in ("ca.pem", "cert.pem", "key.pem")]
  pem = serialization.Encoding.PEM
  for path, data in zip(paths, [
      ca.public_bytes(pem), cert.public_bytes(pem),
      key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                        serialization.NoEncryption())]):
    with open(path, "wb") as f:
      f.write(data)
  return paths


# Headers that belong to one hop, not to the request: the proxy sets its own.
# TF sends `Transfer-Encoding: identity` with a Content-Length, and
# fake-gcs-server answers any Transfer-Encoding it does not know with 501.
_HOP_HEADERS = {"connection", "keep-alive", "proxy-connection",
                "proxy-authorization", "te", "trailer", "transfer-encoding",
                "upgrade", "expect", "content-length"}


class _Forwarder(http.server.BaseHTTPRequestHandler):
  """One TLS tunnel's HTTP/1.1 requests, each sent on to fake-gcs-server
  with its Host header kept (the server tells storage.googleapis.com's
  bucket/object paths from the JSON API by it)."""
  protocol_version = "HTTP/1.1"
  timeout = 120

  def log_message(self, *args):
    pass

  def setup(self):
    super().setup()
    self.upstream = http.client.HTTPConnection(
        "127.0.0.1", self.server.upstream_port, timeout=self.timeout)

  def finish(self):
    try:
      super().finish()
    finally:
      self.upstream.close()

  def _body(self):
    if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
      parts = []
      while True:
        size = int(self.rfile.readline().split(b";")[0], 16)
        if size == 0:
          while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
          return b"".join(parts)
        parts.append(self.rfile.read(size))
        self.rfile.readline()
    return self.rfile.read(int(self.headers.get("Content-Length") or 0))

  def _forward(self):
    body = self._body()
    up = self.upstream
    up.putrequest(self.command, self.path, skip_host=True,
                  skip_accept_encoding=True)
    for key, value in self.headers.items():
      if key.lower() not in _HOP_HEADERS:
        up.putheader(key, value)
    if body or self.command in ("POST", "PUT", "PATCH"):
      up.putheader("Content-Length", str(len(body)))
    up.endheaders(body)
    response = up.getresponse()
    data = response.read()
    self.send_response_only(response.status, response.reason)
    for key, value in response.getheaders():
      if key.lower() in _HOP_HEADERS:
        continue
      if key.lower() == "location":
        value = self._through_tunnel(value)
      self.send_header(key, value)
    if self.command == "HEAD":
      self.send_header("Content-Length",
                       response.getheader("Content-Length", "0"))
    else:
      self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    if self.command != "HEAD":
      self.wfile.write(data)

  def _through_tunnel(self, url):
    """An upload session's URL, as TF must call it: fake-gcs-server names
    it http://<the Host it was called with>/..., and TF's libcurl sends only
    https through the proxy (http://www.googleapis.com it would resolve
    itself, and fail)."""
    parts = urllib.parse.urlsplit(url)
    host = self.headers.get("Host", GOOGLE_HOSTS[0])
    if parts.netloc not in (host, self.server.upstream_netloc):
      return url
    return urllib.parse.urlunsplit(parts._replace(scheme="https", netloc=host))

  do_GET = do_PUT = do_POST = do_PATCH = do_DELETE = do_HEAD = _forward


class _Tunnels(socketserver.StreamRequestHandler):
  """An HTTP proxy that takes only CONNECT to GOOGLE_HOSTS:443 and ends the
  TLS itself, with the test CA's certificate."""

  def handle(self):
    request = self.rfile.readline(65537).split()
    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
      pass
    target = request[1].decode("latin-1") if len(request) == 3 else ""
    host, _, port = target.rpartition(":")
    if request[:1] != [b"CONNECT"] or host not in GOOGLE_HOSTS or port != "443":
      self.wfile.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
      return
    self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
    self.wfile.flush()
    try:
      with self.server.tls.wrap_socket(self.connection, server_side=True) as tls:
        _Forwarder(tls, self.client_address, self.server)
    except OSError:
      pass  # the client hung up (ssl.SSLError is an OSError): nothing to say


class ProxyServer(socketserver.ThreadingTCPServer):
  daemon_threads = True
  allow_reuse_address = True

  def __init__(self, upstream_url, cert, key):
    super().__init__(("127.0.0.1", 0), _Tunnels)
    self.upstream_netloc = urllib.parse.urlsplit(upstream_url).netloc
    self.upstream_port = urllib.parse.urlsplit(upstream_url).port
    self.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    self.tls.load_cert_chain(cert, key)

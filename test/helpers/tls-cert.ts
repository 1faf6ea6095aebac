/** A self-signed certificate for localhost and 127.0.0.1 (openssl), for tests and benches of the reader over TLS. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface SelfSignedCert {
  readonly certFile: string;
  readonly keyFile: string;
  /** The certificate's PEM, to trust as a CA. */
  readonly ca: Buffer;
}

/** Writes cert.pem and key.pem into `dir` (valid one day). */
export function selfSignedCert(dir: string): SelfSignedCert {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  const subject = ['-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', ...subject, '-days', '1', '-keyout', keyFile, '-out', certFile], {
    stdio: 'ignore',
  });
  return { certFile, keyFile, ca: readFileSync(certFile) };
}

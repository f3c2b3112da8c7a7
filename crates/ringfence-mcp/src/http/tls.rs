//! HTTPS settings: the certificate chain and key from PEM files, in a rustls configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem;

/// The TLS settings of HTTPS (made by [`load_tls`]).
pub type TlsConfig = tokio_rustls::rustls::ServerConfig;

/// Why the certificate or key files cannot serve HTTPS; names the file and the problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file cannot be read, or a PEM section in it is broken.
    #[error("http.tls_cert {}: {source}", path.display())]
    Certificate { path: PathBuf, source: pem::Error },
    #[error("http.tls_cert {}: no PEM certificate in the file", path.display())]
    NoCertificate { path: PathBuf },
    #[error("http.tls_key {}: no usable PEM private key ({source})", path.display())]
    Key { path: PathBuf, source: pem::Error },
    /// rustls refused its own default protocol versions for the crypto provider.
    #[error("TLS: {0}")]
    Protocols(#[source] rustls::Error),
    #[error(
        "http.tls_cert/http.tls_key: the key does not fit the certificate or is unsupported ({0})"
    )]
    KeyMismatch(#[source] rustls::Error),
}

/// The TLS settings for HTTPS from PEM files: a certificate chain (leaf first) and its
/// private key (PKCS#8, PKCS#1 or SEC1). Errors name the file and the problem.
#[allow(clippy::disallowed_methods)] // the operator's certificate files, not under a root
pub fn load_tls(cert: &Path, key: &Path) -> Result<Arc<TlsConfig>, TlsError> {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let cert_error = |source| TlsError::Certificate {
        path: cert.to_owned(),
        source,
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(cert_error)?
        .collect::<Result<_, _>>()
        .map_err(cert_error)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert.to_owned(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|source| TlsError::Key {
        path: key.to_owned(),
        source,
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocols)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::KeyMismatch)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    #[test]
    #[allow(clippy::disallowed_methods)] // writes the test's own files
    fn errors_name_the_file_and_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = super::load_tls(&missing, &missing).unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("http.tls_cert {}: ", missing.display())),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = super::load_tls(&empty, &missing).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "http.tls_cert {}: no PEM certificate in the file",
                empty.display()
            )
        );
    }
}

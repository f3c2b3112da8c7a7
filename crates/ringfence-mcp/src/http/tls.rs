//! HTTPS settings: the certificate chain and key from PEM files, in a rustls configuration.

use std::sync::Arc;

/// The TLS settings of HTTPS (made by [`load_tls`]).
pub type TlsConfig = tokio_rustls::rustls::ServerConfig;

/// The TLS settings for HTTPS from PEM files: a certificate chain (leaf first) and its
/// private key (PKCS#8, PKCS#1 or SEC1). Errors name the file and the problem.
#[allow(clippy::disallowed_methods)] // the operator's certificate files, not under a root
pub fn load_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("http.tls_cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("http.tls_cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "http.tls_cert {}: no PEM certificate in the file",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "http.tls_key {}: no usable PEM private key ({e})",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("http.tls_cert/http.tls_key: the key does not fit the certificate or is unsupported ({e})"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

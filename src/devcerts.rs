//! Development certificates: a CA and a serving certificate it signs. For `make certs`, tests and
//! the e2e harness; production certificates come from cert-manager.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::path::Path;

pub struct DevPki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// A fresh CA and a leaf for `sans` (IP literals become IP SANs).
pub fn generate(sans: &[String]) -> Result<DevPki, rcgen::Error> {
    let ca_key = KeyPair::generate()?;
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "volguard dev CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca, ca_key);

    let leaf_key = KeyPair::generate()?;
    let mut leaf = CertificateParams::new(Vec::<String>::new())?;
    leaf.distinguished_name
        .push(DnType::CommonName, "volguard-webhook");
    leaf.subject_alt_names = sans
        .iter()
        .map(|s| match s.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => s.clone().try_into().map(SanType::DnsName),
        })
        .collect::<Result<_, _>>()?;
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
    Ok(DevPki {
        ca_pem: ca_cert.pem(),
        cert_pem: leaf_cert.pem(),
        key_pem: leaf_key.serialize_pem(),
    })
}

pub fn write(dir: &Path, pki: &DevPki) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("ca.crt"), &pki.ca_pem)?;
    std::fs::write(dir.join("tls.crt"), &pki.cert_pem)?;
    std::fs::write(dir.join("tls.key"), &pki.key_pem)?;
    Ok(())
}

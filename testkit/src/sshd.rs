//! A real OpenSSH sshd on a loopback port with throwaway keys.

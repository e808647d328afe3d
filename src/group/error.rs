//! Why a group call failed: [`GroupError`].

/// Why a group call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// The group could not be set up (sockets, an impossible tree, ...).
    Setup(String),
    /// No member has this rank.
    NoSuchMember(u32),
    /// The member has crashed.
    Dead(u32),
    /// The member was fenced: member `by`'s transport or detector suspected it (silent too
    /// long), so it stopped, as fail-stop enforcement requires; the others go on without it.
    Fenced { rank: u32, by: u32 },
    /// The payload is longer than one datagram of the chosen algorithm carries.
    TooLarge { len: usize, max: usize },
    /// Agreements need at most `max` members (an ERA message must fit one datagram).
    TooManyToAgree { max: u32 },
    /// The group was built without agreements ([`GroupBuilder::agreements`](super::GroupBuilder::agreements)).
    NoAgreements,
    /// The group was built without broadcasts ([`GroupBuilder::broadcasts`](super::GroupBuilder::broadcasts)).
    NoBroadcasts,
    /// The member was joined without agreement streams ([`MemberSpec::streams`](super::MemberSpec::streams)).
    NoStreams,
    /// A [`Stream`](super::Stream) that cannot run (no operations, a window out of range, no roots).
    BadStream(String),
    /// The group's thread is gone.
    Closed,
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::Setup(e) => write!(f, "cannot set the group up: {e}"),
            GroupError::NoSuchMember(r) => write!(f, "no member {r}"),
            GroupError::Dead(r) => write!(f, "member {r} has crashed"),
            GroupError::Fenced { rank, by } => write!(
                f,
                "member {rank} was fenced: member {by} suspected it, so it stopped (fail-stop)"
            ),
            GroupError::TooLarge { len, max } => write!(f, "payload of {len} bytes, at most {max} fit"),
            GroupError::TooManyToAgree { max } => write!(f, "agreements need at most {max} members"),
            GroupError::NoAgreements => f.write_str("the group was built without agreements"),
            GroupError::NoBroadcasts => f.write_str("the group was built without broadcasts"),
            GroupError::NoStreams => f.write_str("the member was joined without agreement streams"),
            GroupError::BadStream(e) => write!(f, "cannot run the stream: {e}"),
            GroupError::Closed => f.write_str("the group's thread is gone"),
        }
    }
}

impl std::error::Error for GroupError {}

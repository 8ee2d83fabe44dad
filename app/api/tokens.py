"""``/api/v1/tokens``: admins create, list and revoke API tokens. The secret is shown once, at creation."""

from fastapi import APIRouter, status

from app.api.deps import AdminAuth, AdminIssuer
from app.api.responses import answers
from app.auth import service
from app.schemas.ids import Id
from app.schemas.token import TokenCreate, TokenCreated, TokenOut
from app.sessions import SessionDep

router = APIRouter(
    prefix="/api/v1/tokens", tags=["tokens"], dependencies=[AdminAuth], responses=answers(401, 403, 422, 429)
)


@router.post("", response_model=TokenCreated, status_code=status.HTTP_201_CREATED, responses=answers(413))
def create_token(by: AdminIssuer, body: TokenCreate, session: SessionDep) -> TokenCreated:
    """A new token with the given scopes; the answer holds its secret, which is never shown again.

    The new token is issued by the caller's: revoking that one (or any above it) ends this one too.
    """
    token, secret = service.create(session=session, name=body.name, scopes=body.scopes, issued_by=by.token_id)
    return TokenCreated(**TokenOut.model_validate(token).model_dump(), secret=secret)


@router.get("", response_model=list[TokenOut])
def list_tokens(session: SessionDep) -> list[TokenOut]:
    """Every token, revoked ones included, without secrets."""
    return [TokenOut.model_validate(t) for t in service.list_all(session=session)]


@router.delete("/{token_id}", response_model=TokenOut, responses=answers(404))
def revoke_token(token_id: Id, session: SessionDep) -> TokenOut:
    """Revoke a token: from now on it, and every token issued under it, gets 401. The row stays, for the record."""
    return TokenOut.model_validate(service.revoke(session=session, token_id=token_id))

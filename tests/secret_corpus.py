"""Real-looking credentials in each form the redaction rules cover, and near misses that must
stay. Every value here is invented; none unlocks anything."""

from __future__ import annotations

from typing import NamedTuple


class Secret(NamedTuple):
    form: str
    text: str  # as it would appear in a message
    value: str  # what must never be stored (a part of `text`)
    masked: str  # `text` after redaction


SECRETS: tuple[Secret, ...] = (
    Secret(
        "env assignment (reference)",
        "OPENAI_API_KEY=sk-Zq8vN3rT5wY7uK1mP9sL2dF4gH6jA0cX",
        "sk-Zq8vN3rT5wY7uK1mP9sL2dF4gH6jA0cX",
        "OPENAI_API_KEY=***",
    ),
    Secret("openai key", "sk-Rb4nM8qW2eT6yU0iO3pA5sD7fG9hJ1kL", "Rb4nM8qW2eT6yU0iO3pA5sD7fG9hJ1kL", "***"),
    Secret(
        "openai project key",
        "sk-proj-Hc7xV2bN9mQ4wE8rT1yU5iO0pAs3dF6g",
        "Hc7xV2bN9mQ4wE8rT1yU5iO0pAs3dF6g",
        "***",
    ),
    Secret(
        "anthropic key",
        "sk-ant-api03-Lk2jH5gF8dS1aP4oI7uY0tR3eW6qZ9xC-vB2nM5",
        "Lk2jH5gF8dS1aP4oI7uY0tR3eW6qZ9xC",
        "***",
    ),
    Secret("aws access key id", "AKIAJX4Q7ZT2M9RW3KPB", "AKIAJX4Q7ZT2M9RW3KPB", "***"),
    Secret("aws session key id", "ASIAQ3ZK8WN5T2XJ7MCV", "ASIAQ3ZK8WN5T2XJ7MCV", "***"),
    Secret(
        "aws secret assignment",
        "aws_secret_access_key=wJ7rXu2nF8mK4pL1qZ9vB3cT6yH0sD5gE2aR8iOz",
        "wJ7rXu2nF8mK4pL1qZ9vB3cT6yH0sD5gE2aR8iOz",
        "aws_secret_access_key=***",
    ),
    Secret(
        "github classic token",
        "ghp_T4kL9mQ2wE7rY1uI5oP8aS3dF6gH0jK2lZ4x",
        "T4kL9mQ2wE7rY1uI5oP8aS3dF6gH0jK2lZ4x",
        "***",
    ),
    Secret(
        "github oauth token",
        "gho_B7nM2qW5eR8tY1uI4oP7aS0dF3gH6jK9lZ2x",
        "B7nM2qW5eR8tY1uI4oP7aS0dF3gH6jK9lZ2x",
        "***",
    ),
    Secret(
        "github fine-grained token",
        "github_pat_11AB2CD3E0fGhIjKlMnOpQ_rStUvWxYz0123456789aBcDeFgHiJkLmNoP",
        "11AB2CD3E0fGhIjKlMnOpQ_rStUvWxYz0123456789",
        "***",
    ),
    Secret(
        "slack bot token",
        "xoxb-2741963058-6829174035-Qw3Er5Ty7Ui9Op1As",
        "2741963058-6829174035-Qw3Er5Ty7Ui9Op1As",
        "***",
    ),
    Secret(
        "slack user token", "xoxp-3852074169-7930285146-Zx8Cv6Bn4", "3852074169-7930285146-Zx8Cv6Bn4", "***"
    ),
    Secret(
        "google api key",
        "AIzaSyD4f7Gh2Jk9Lm3Np6Qr1St8Uv5Wx0Yz_Ab",
        "SyD4f7Gh2Jk9Lm3Np6Qr1St8Uv5Wx0Yz",
        "***",
    ),
    Secret("stripe live key", "sk_live_51Hq8Zr2Kx7Vn4Tp9Wm3Ys6Lb", "51Hq8Zr2Kx7Vn4Tp9Wm3Ys6Lb", "***"),
    Secret("stripe restricted key", "rk_live_73Jd5Fs8Gh2Ka6Lq1Zw9Xe4Rc", "73Jd5Fs8Gh2Ka6Lq1Zw9Xe4Rc", "***"),
    Secret(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJub3JhLTQyIiwiaWF0IjoxNzAwMDAwMDAwfQ."
        "Xk3Tq9Lm2Vb7Nc4Wz8Hd1Fg6Js5Pa0Re",
        "eyJzdWIiOiJub3JhLTQyIiwiaWF0IjoxNzAwMDAwMDAwfQ",
        "***",
    ),
    Secret(
        "bearer header",
        "Authorization: Bearer 9fK2mQ7xL4vT8wN1pR6sZ3yB5cD0hJ",
        "9fK2mQ7xL4vT8wN1pR6sZ3yB5cD0hJ",
        "Authorization: Bearer ***",
    ),
    Secret("token assignment", "GITLAB_TOKEN=Vr8Wn3Qz6Lp1Kt4Xm", "Vr8Wn3Qz6Lp1Kt4Xm", "GITLAB_TOKEN=***"),
    Secret("secret assignment", "CLIENT_SECRET=Hy5Gt2Rf9Ed6Ws", "Hy5Gt2Rf9Ed6Ws", "CLIENT_SECRET=***"),
    Secret("password assignment", "DB_PASSWORD=tangerine-Orbit-77", "tangerine-Orbit-77", "DB_PASSWORD=***"),
    Secret("lower-case password", "password=Quokka!Lantern93", "Quokka!Lantern93", "password=***"),
    Secret(
        "quoted json secret",
        '"client_secret": "Mv2Xc8Zb4Nq6Wr"',
        "Mv2Xc8Zb4Nq6Wr",
        '"client_secret": "***"',
    ),
    Secret(
        "pem private key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun",
        "-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----",
    ),
    Secret(
        "password in url",
        "postgres://nora:Plum9Sextant4@db.internal.example:5432/app",
        "Plum9Sextant4",
        "postgres://nora:***@db.internal.example:5432/app",
    ),
)

# Text that looks a little like a credential and must be stored exactly as written.
NEAR_MISSES: tuple[str, ...] = (
    "sketch",
    "task-force",
    "skip=3",
    "password reset link",
    "https://example.com/docs/getting-started?page=2",
    "mailto:nora@example.com",
    "the bearer of good news",
    "sort key=name",
    "max_tokens=512",
    "monkey=3",
    "keyboard: the left one",
    "Basic idea first",
    "ASIAN noodles",
    "risk-free",
    "desk_live_x",
    "ghost_town",
    "eyJ alone",
    "AKIA alone",
    "token budget is fine",
    "the secret ingredient is basil",
)
